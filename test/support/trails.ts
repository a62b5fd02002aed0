/**
 * What API tests read back about recipients: a message sent through `POST /v2/messages`, the
 * sentMessage events of one recipient from the outbox, and their trail (`viber:sent`, …).
 */
import assert from 'node:assert/strict';
import { waitFor, type TestService } from './harness.js';

/** Sends one message object; asserts it was accepted whole and returns its message_id. */
export async function sendMessage(svc: TestService, apiKey: string, message: Record<string, unknown>): Promise<string> {
  const res = await svc.request('POST', '/v2/messages', { body: [message], headers: { 'x-api-key': apiKey } });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.body.rejected.length, 0, JSON.stringify(res.body.rejected));
  return res.body.accepted[0].message_id as string;
}

export interface TrailEvent {
  gateway: string;
  result: string;
}

/** The events of one recipient (by its public id), oldest first. */
export async function recipientEvents<E extends TrailEvent>(svc: TestService, publicId: string): Promise<E[]> {
  const rows = await svc.sql<{ body: string }>(
    'SELECT e.body FROM events e JOIN recipients r ON r.id = e.recipient_id WHERE r.public_id = $1 ORDER BY e.id', [publicId]);
  return rows.map((r) => JSON.parse(r.body) as E);
}

export const trailOf = (evs: readonly TrailEvent[]): string[] => evs.map((e) => `${e.gateway}:${e.result}`);

/** Waits until the recipient has as many events as `expected`, then asserts they are exactly those. */
export async function waitForTrail<E extends TrailEvent>(svc: TestService, publicId: string, expected: string[], timeoutMs = 8000): Promise<E[]> {
  let last: E[] = [];
  try {
    return await waitFor(async () => {
      last = await recipientEvents<E>(svc, publicId);
      return last.length >= expected.length ? last : null;
    }, timeoutMs, `events of ${publicId}`);
  } finally {
    assert.deepEqual(trailOf(last), expected, publicId);
  }
}
