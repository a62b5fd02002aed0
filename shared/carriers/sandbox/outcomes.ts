/**
 * The sandbox carrier's outcome table (D10), as a pure function: what happens to an attempt,
 * chosen by the last two digits of the number. Delays are relative to the hand-over.
 */
import { CHANNEL_MODULES, type AttemptState, type Channel } from '../../channels/index.js';

export interface ScriptedReport {
  afterMs: number;
  state: AttemptState;
  resultInfo: string;
}

export function sandboxScript(channel: Channel, phone: string, slowDeliveryMs: number): ScriptedReport[] {
  const ending = phone.slice(-2);
  // Channels whose step succeeds at `sent` (SMS) get SMS receipts; the others are delivered and seen.
  const sms = CHANNEL_MODULES[channel].succeedsAt === 'sent';
  const sent = (ms: number): ScriptedReport => ({ afterMs: ms, state: 'sent', resultInfo: 'Sent' });
  switch (ending) {
    case '01':
      return [sent(10), { afterMs: 40, state: 'undelivered', resultInfo: '[1] Undelivered' }];
    case '02':
      return [{ afterMs: 10, state: 'failed', resultInfo: '[3] Failed' }];
    case '03':
      return [sent(10)];
    case '04':
      return sms
        ? [sent(10), { afterMs: slowDeliveryMs, state: 'delivered', resultInfo: '[0] Delivered' }]
        : [{ afterMs: 10, state: 'undelivered', resultInfo: `[1] Not a ${CHANNEL_MODULES[channel].label} user` }];
    case '05':
      return [{ afterMs: 10, state: 'rejected', resultInfo: '[2] Rejected by carrier' }];
    default:
      return sms
        ? [sent(10), { afterMs: 30, state: 'delivered', resultInfo: '[0] Delivered' }]
        : [sent(10), { afterMs: 30, state: 'delivered', resultInfo: '[0] Delivered' }, { afterMs: 60, state: 'seen', resultInfo: '[0] Seen' }];
  }
}
