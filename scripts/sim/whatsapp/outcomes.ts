/**
 * The WhatsApp simulator's outcome table (channels.md section 3), as a pure function of the
 * recipient's last two digits: either a synchronous Graph error, or 200 and the statuses the
 * simulator reports afterwards, in order.
 *
 *   other  200; sent, delivered, read        05  400 code 131021
 *   01     200; sent, then failed 131026      06  400 code 130429 twice, then as "other"
 *   02     HTTP 500 code 131000               07  400 code 131056
 *   03     200; sent only                     08  200; sent, read (no delivered)
 *   04     200; failed 131026 (no sent)       09  200; failed 131042
 */

export type SimStatusName = 'sent' | 'delivered' | 'read' | 'failed';

export interface PlannedStatus {
  status: SimStatusName;
  /** Meta's error code of a `failed` status. */
  code?: number;
}

export interface SimOutcome {
  /** A synchronous error answer instead of 200. */
  error?: { http: number; code: number };
  /** For 06: how many sends of the same message fail with `error` before one succeeds. */
  failFirst?: number;
  /** Statuses after a 200, in order. */
  statuses: PlannedStatus[];
}

const S = (status: SimStatusName, code?: number): PlannedStatus => (code === undefined ? { status } : { status, code });
const FULL = [S('sent'), S('delivered'), S('read')];

export function simOutcome(to: string): SimOutcome {
  switch (to.slice(-2)) {
    case '01':
      return { statuses: [S('sent'), S('failed', 131026)] };
    case '02':
      return { error: { http: 500, code: 131000 }, statuses: [] };
    case '03':
      return { statuses: [S('sent')] };
    case '04':
      return { statuses: [S('failed', 131026)] };
    case '05':
      return { error: { http: 400, code: 131021 }, statuses: [] };
    case '06':
      return { error: { http: 400, code: 130429 }, failFirst: 2, statuses: FULL };
    case '07':
      return { error: { http: 400, code: 131056 }, statuses: [] };
    case '08':
      return { statuses: [S('sent'), S('read')] };
    case '09':
      return { statuses: [S('failed', 131042)] };
    default:
      return { statuses: FULL };
  }
}
