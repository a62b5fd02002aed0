/**
 * Meta's WhatsApp error codes and what each means for a flow step (channels.md 1.6). Errors are
 * classified by the numeric `error.code` only: Meta answers most errors, throttling included,
 * with HTTP 400 and says its titles will go away.
 *
 * - unreachable: this recipient cannot take this channel now; the step ends and the flow falls back.
 * - retry: throttled or a transient fault at Meta; the same step is tried again within its ttl.
 * - config: an account, token, template or payment problem; the step fails and the sender is flagged.
 * - request: our request was wrong; the step fails.
 */
import { refusedOutcome, type SendOutcome } from '../http-carrier.js';

export type GraphErrorClass = 'unreachable' | 'retry' | 'config' | 'request';

interface CodeRow {
  cls: GraphErrorClass;
  title: string;
}

const TABLE: ReadonlyMap<number, CodeRow> = new Map<number, CodeRow>([
  // The recipient cannot be reached on WhatsApp now.
  [131026, { cls: 'unreachable', title: 'Message Undeliverable' }],
  [131047, { cls: 'unreachable', title: 'Re-engagement message' }],
  [131049, { cls: 'unreachable', title: 'Not delivered to maintain healthy ecosystem engagement' }],
  [131050, { cls: 'unreachable', title: 'User stopped marketing messages from this business' }],
  [130472, { cls: 'unreachable', title: "User's number is part of an experiment" }],
  // Throttling and transient faults.
  [130429, { cls: 'retry', title: 'Rate limit hit' }],
  [131048, { cls: 'retry', title: 'Spam rate limit hit' }],
  [131056, { cls: 'retry', title: '(Business Account, Consumer Account) pair rate limit hit' }],
  [80007, { cls: 'retry', title: 'Rate limit issues' }],
  [4, { cls: 'retry', title: 'API Too Many Calls' }],
  [131000, { cls: 'retry', title: 'Something went wrong' }],
  [1, { cls: 'retry', title: 'API Unknown' }],
  [2, { cls: 'retry', title: 'API Service' }],
  [131016, { cls: 'retry', title: 'Service unavailable' }],
  [132069, { cls: 'retry', title: 'Flow is in throttled state' }],
  // Account, token, template, payment.
  [131042, { cls: 'config', title: 'Business eligibility payment issue' }],
  [132001, { cls: 'config', title: 'Template does not exist' }],
  [132015, { cls: 'config', title: 'Template is Paused' }],
  [132016, { cls: 'config', title: 'Template is Disabled' }],
  [132068, { cls: 'config', title: 'Flow is in blocked state' }],
  [0, { cls: 'config', title: 'AuthException' }],
  [190, { cls: 'config', title: 'Access token has expired' }],
  [10, { cls: 'config', title: 'Permission Denied' }],
  [368, { cls: 'config', title: 'Temporarily blocked for policies violations' }],
  [131031, { cls: 'config', title: 'Account has been locked' }],
  [133005, { cls: 'config', title: 'Two step verification PIN Mismatch' }],
  [133006, { cls: 'config', title: 'Phone number re-verification needed' }],
  [133009, { cls: 'config', title: 'Two step verification PIN Guessed Too Fast' }],
  [133010, { cls: 'config', title: 'Phone number Not Registered' }],
  [133015, { cls: 'config', title: 'Please wait a few minutes before attempting to register this phone number' }],
  [133016, { cls: 'config', title: 'Account register deregister rate limit exceeded' }],
  // Our request was wrong.
  [100, { cls: 'request', title: 'Invalid parameter' }],
  [131008, { cls: 'request', title: 'Required parameter is missing' }],
  [131009, { cls: 'request', title: 'Parameter value is not valid' }],
  [131051, { cls: 'request', title: 'Unsupported message type' }],
  [131021, { cls: 'request', title: 'Recipient cannot be sender' }],
  [132000, { cls: 'request', title: 'Template Param Count Mismatch' }],
  [132005, { cls: 'request', title: 'Template Hydrated Text Too Long' }],
  [132007, { cls: 'request', title: 'Template Format Character Policy Violated' }],
  [132012, { cls: 'request', title: 'Template Parameter Format Mismatch' }],
]);

/** The class of a Meta error code; codes we do not know are treated as our bad request. */
export function graphErrorClass(code: number): GraphErrorClass {
  const row = TABLE.get(code);
  if (row) return row.cls;
  // 200-299: the app lacks a permission (Meta's "API Permission" range).
  if (code >= 200 && code <= 299) return 'config';
  return 'request';
}

/** Meta's title for a code, when we know it. */
export function graphErrorTitle(code: number): string | undefined {
  return TABLE.get(code)?.title ?? (code >= 200 && code <= 299 ? 'API Permission' : undefined);
}

/** The `result_info` form: `[<code>] <title>`. */
export function errorInfo(code: number, title: string): string {
  return `[${code}] ${title}`;
}

/** What a Graph error body says: its numeric code (when there is one) and a title for humans. */
export interface GraphErrorFields {
  code?: number;
  title: string;
}

const MAX_TITLE = 200;

function cleanTitle(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > MAX_TITLE ? `${flat.slice(0, MAX_TITLE - 1)}…` : flat;
}

function asCode(value: unknown): number | undefined {
  if (typeof value === 'number' && Number.isInteger(value)) return value;
  if (typeof value === 'string' && /^\d{1,9}$/.test(value)) return Number(value);
  return undefined;
}

/**
 * Reads Graph's `{"error": {"message": "(#<code>) <title>", "code": <int>, …}}`, or an item of a
 * status webhook's `errors[]` (`{code, title, message}`). The title is the text after `(#code)`,
 * else the item's `title`, else the message as it is (Graph's OAuth and code-exchange errors have
 * no `(#code)`: "Error validating client secret."), else the table's. Null when `body` is neither.
 */
export function readGraphError(body: unknown): GraphErrorFields | null {
  if (typeof body !== 'object' || body === null) return null;
  const outer = body as Record<string, unknown>;
  const err = typeof outer.error === 'object' && outer.error !== null ? (outer.error as Record<string, unknown>) : outer;
  const code = asCode(err.code);
  const message = typeof err.message === 'string' ? err.message : undefined;
  const ownTitle = typeof err.title === 'string' && err.title.trim() !== '' ? err.title : undefined;
  if (code === undefined && message === undefined && ownTitle === undefined) return null;
  const hashed = message ? /^\(#\d+\)\s*(\S[\s\S]*)$/.exec(message) : null;
  const plain = message !== undefined && message.trim() !== '' ? message : undefined;
  const title = hashed?.[1] ?? ownTitle ?? plain ?? (code !== undefined ? graphErrorTitle(code) : undefined) ?? 'Unknown error';
  return code === undefined ? { title: cleanTitle(title) } : { code, title: cleanTitle(title) };
}

/** The outcome a Meta error code leads to, with `info` `[<code>] <title>`. */
export function outcomeForCode(code: number, title?: string): SendOutcome {
  return refusedOutcome(graphErrorClass(code), code, errorInfo(code, title ?? graphErrorTitle(code) ?? 'Unknown error'));
}

/**
 * The outcome of a send that Graph answered with an error. The class comes from `error.code`;
 * the HTTP status decides only when the body has no code: 5xx and 429 are retried, 401/403 are
 * a configuration problem, anything else our bad request (all with code 0).
 */
export function graphErrorOutcome(httpStatus: number, body: unknown): SendOutcome {
  const fields = readGraphError(body);
  if (fields?.code !== undefined) return outcomeForCode(fields.code, fields.title);
  // No Meta code: the text alone (`[0]` would read as success in the spec's pattern, or as Meta's code 0).
  return refusedOutcome(uncodedClass(httpStatus), 0, uncodedTitle(httpStatus, fields));
}

/** The class of an error answer that carries no Meta code, by its HTTP status. */
export function uncodedClass(httpStatus: number): GraphErrorClass {
  if (httpStatus >= 500 || httpStatus === 429) return 'retry';
  return httpStatus === 401 || httpStatus === 403 ? 'config' : 'request';
}

/** The title of an error answer that carries no Meta code. */
export function uncodedTitle(httpStatus: number, fields: GraphErrorFields | null): string {
  return fields ? `HTTP ${httpStatus}: ${fields.title}` : `HTTP ${httpStatus} from Graph`;
}
