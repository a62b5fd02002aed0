/**
 * Hostile input (issue 22 item 7): thousands of malformed requests, generated from a seed, over
 * every API family (sending v2, legacy v1, simple, XML, REST, verification, sandbox, admin, carrier
 * callbacks), and
 * the explicit cases the issue lists. Every answer must be below 500, and a refused call must
 * write nothing: each table carries an audit trigger, and the rows it logged during each request
 * are compared with what the answer says was accepted.
 *
 * The service runs as the `web` role (no workers), so the only writes are the requests' own.
 * Seed and size: HOSTILE_SEED (default 22), HOSTILE_REQUESTS (default 4000), HOSTILE_BUDGET_S (default
 * 35): the requests are sent in their seeded order until all are sent or the budget is spent, and
 * at least HOSTILE_MIN (default 1500) whatever the budget, so the file stays bounded on a busy
 * machine and the same seed always sends the same prefix. HOSTILE_REPORT=<file> writes every
 * problem found there (the assertion shows the first 20).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { Writable } from 'node:stream';
import { writeFileSync } from 'node:fs';
import { pino } from 'pino';
import { startTestService, ADMIN_TOKEN, type TestService } from '../support/harness.js';
import { mutate, seededRng, pick, type HostileRequest, type Template, type Rng } from '../support/hostile.js';

const SEED = Number(process.env.HOSTILE_SEED ?? 22);
const TOTAL = Number(process.env.HOSTILE_REQUESTS ?? 4000);
const BUDGET_MS = Number(process.env.HOSTILE_BUDGET_S ?? 35) * 1000;
const MIN_REQUESTS = Math.min(TOTAL, Number(process.env.HOSTILE_MIN ?? 1500));

let svc: TestService;
const logLines: Array<{ level: number; msg: string; err?: unknown; stack?: unknown }> = [];
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

interface Ids {
  sendKey: string;
  restKey: string;
  restSubId: number;
  verifyKey: string;
  token: string;
  timestamp: string;
  adminAccount: number;
  adminSubKey: number;
}
let ids: Ids;

const bearer = { authorization: `Bearer ${ADMIN_TOKEN}` };

before(async () => {
  // Every log line is kept: a client's mistake must never be logged at error level (with a stack).
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (line) logLines.push(JSON.parse(line));
      }
      done();
    },
  });
  // A request timeout short enough to be waited for below, long enough for the 7 MiB uploads.
  svc = await startTestService({ role: 'web', env: { ALLOW_PRIVATE_CALLBACKS: 'false', HTTP_REQUEST_TIMEOUT_MS: '5000' }, logger: pino({ level: 'info' }, sink) });
  const send = await svc.createAccount({ country: 'CZ' });
  const rest = await svc.createAccount({ country: 'CZ' });
  const verify = await svc.createAccount({ country: 'CZ' });
  const admin = await svc.createAccount({ country: 'CZ' });
  const restSub = await svc.request('POST', '/v1/apikey/add', { body: { note: 'sub', shared: false, currency: 'CZK' }, headers: { 'x-api-key': rest.apiKey } });
  assert.equal(restSub.status, 200, restSub.text);
  const adminSub = await svc.request('POST', '/v1/apikey/add', { body: { note: 'sub', shared: false, currency: 'CZK' }, headers: { 'x-api-key': admin.apiKey } });
  assert.equal(adminSub.status, 200, adminSub.text);
  assert.equal((await svc.admin('PATCH', `/accounts/${verify.accountId}`, { verification_secret: 'a-secret-of-sixteen-chars' })).status, 200);
  const started = await svc.request('POST', '/v1/validations', { body: { phoneNumber: '420777123456' }, headers: { 'x-api-key': verify.apiKey } });
  assert.equal(started.status, 200, started.text);
  ids = {
    sendKey: send.apiKey, restKey: rest.apiKey, restSubId: restSub.body.id, verifyKey: verify.apiKey, token: started.body.token,
    timestamp: started.body.timestamp, adminAccount: admin.accountId, adminSubKey: adminSub.body.id,
  };
  // The audit: one row per row written, by table, committed or not at all with its transaction.
  await svc.sql(`CREATE TABLE hostile_audit (id bigserial PRIMARY KEY, tbl text NOT NULL, op text NOT NULL)`);
  await svc.sql(`CREATE FUNCTION hostile_audit() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN INSERT INTO hostile_audit (tbl, op) VALUES (TG_TABLE_NAME, TG_OP); RETURN NULL; END $$`);
  await svc.sql(`DO $$ DECLARE t text; BEGIN
    FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'hostile_audit' LOOP
      EXECUTE format('CREATE TRIGGER hostile_audit AFTER INSERT OR UPDATE OR DELETE ON %I FOR EACH ROW EXECUTE FUNCTION hostile_audit()', t);
    END LOOP; END $$`);
});

after(async () => {
  agent.destroy();
  await svc?.stop();
});

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- any family's JSON
}

/** One request over a kept-alive connection; `status` 0 when the connection failed. */
function send(r: Pick<HostileRequest, 'method' | 'path' | 'headers' | 'body'>, timeoutMs = 10_000): Promise<Answer> {
  const url = new URL(svc.url);
  return new Promise((resolve) => {
    const req = http.request({
      host: url.hostname, port: url.port, method: r.method, path: r.path, agent, timeout: timeoutMs,
      headers: { ...r.headers, ...(r.body !== undefined && { 'content-length': String(r.body.length) }) },
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
      });
      res.on('error', (err) => resolve({ status: 0, headers: {}, text: String(err), json: undefined }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err) => resolve({ status: 0, headers: {}, text: `${(err as NodeJS.ErrnoException).code ?? ''} ${err.message}`, json: undefined }));
    req.end(r.body);
  });
}

let auditMark = 0;
/** The rows written since the last call, by table. */
async function writesSince(): Promise<Map<string, number>> {
  const rows = await svc.sql<{ tbl: string; n: number; last: number }>(
    'SELECT tbl, count(*)::int AS n, max(id)::int AS last FROM hostile_audit WHERE id > $1 GROUP BY tbl', [auditMark]);
  const out = new Map<string, number>();
  for (const row of rows) {
    out.set(row.tbl, row.n);
    auditMark = Math.max(auditMark, row.last);
  }
  return out;
}

function templates(): Template[] {
  const s = { 'x-api-key': ids.sendKey };
  const r = { 'x-api-key': ids.restKey };
  const v = { 'x-api-key': ids.verifyKey };
  const tomorrow = new Date(Date.now() + 86_400_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
  const today = new Date().toISOString().slice(0, 10);
  const message = {
    body: 'Hello',
    to: [{ phone_number: '420777123456' }, { phone_number: '+44 7911 123456' }],
    flow: [
      { viber: { sender: 'Shop', body: 'Hi', buttons: [{ title: 'Open', url: 'https://example.com/x' }], ttl: 60 } },
      { whatsapp_text: { sender: '12345', body: 'Hi', ttl: 5 } },
      { whatsapp_template: { template_name: 'order', language: 'en', params: ['a'], params_header: ['b'], params_buttons: ['c'], ttl: 5 } },
      { sms: { sender: 'Shop', gateway: 'high', ttl: 5, type: 'utf' } },
    ],
    callback: 'https://example.com/hook',
    tag: 'transactional',
    params: { a: 1 },
    datetime: tomorrow,
    delivery_time: { days: ['monday', 'friday'], start: '08:00', end: '20:00', tz: 'Europe/Prague' },
    payload: { order: 42, nested: { a: [1, 2] } },
  };
  const simple = { body: 'Plain', to: [{ phone_number: '777123456' }] };
  const xml = '<?xml version="1.0" encoding="UTF-8"?><RequestDocument><RequestList><Request Type="high" Sender="Shop">'
    + '<Message Type="Text">Hello</Message><NumbersList><Number>+420777123456</Number><Number>777123457</Number></NumbersList>'
    + '</Request></RequestList></RequestDocument>';
  const a = ids.adminAccount;
  return [
    { family: 'sending', name: 'POST /v2/message', method: 'POST', path: '/v2/message', headers: s, body: { kind: 'json', value: message } },
    { family: 'sending', name: 'POST /v2/messages', method: 'POST', path: '/v2/messages', headers: s, body: { kind: 'json', value: [message, simple] } },
    { family: 'sending', name: 'GET /v2/simple/message', method: 'GET', path: '/v2/simple/message', headers: {},
      query: { apikey: ids.sendKey, phone_number: '420777123456', message: 'Hi', sender: 'Shop', datetime: tomorrow, customID: 'c-1', gateway: 'high' }, body: { kind: 'none' } },
    { family: 'sending', name: 'POST /v2/simple/message', method: 'POST', path: '/v2/simple/message', headers: s,
      body: { kind: 'form', fields: { phone_number: '420777123456', message: 'Hi', sender: 'Shop', time: tomorrow, customID: 'c-2' } } },
    { family: 'legacy v1', name: 'POST /v1/messages', method: 'POST', path: '/v1/messages', headers: s, body: { kind: 'json', value: [message, simple] } },
    { family: 'xml', name: 'POST /xml', method: 'POST', path: '/xml', headers: {}, body: { kind: 'xml', fields: { apikey: ids.sendKey, XMLDATA: xml } } },
    { family: 'rest', name: 'GET /v1/credit', method: 'GET', path: '/v1/credit', headers: r, body: { kind: 'none' } },
    { family: 'rest', name: 'GET /v1/messages', method: 'GET', path: '/v1/messages', headers: r, query: { date: today, limit: '10', tag: 'transactional', phone_number: '420777123456' }, body: { kind: 'none' } },
    { family: 'rest', name: 'POST /v1/apikey/update', method: 'POST', path: '/v1/apikey/update', headers: r,
      body: { kind: 'json', value: { note: 'shop', default_callback_url: 'https://example.com/h', webhook_secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' } } },
    { family: 'rest', name: 'POST /v1/apikey/add', method: 'POST', path: '/v1/apikey/add', headers: r, body: { kind: 'json', value: { note: 'n', shared: false, currency: 'CZK', default_callback_url: 'https://example.com/k' } } },
    { family: 'rest', name: 'GET /v1/apikey/list', method: 'GET', path: '/v1/apikey/list', headers: r, body: { kind: 'none' } },
    { family: 'rest', name: 'POST /v1/apikey/change', method: 'POST', path: '/v1/apikey/change', headers: r, body: { kind: 'json', value: { id: ids.restSubId, disable: 0 } } },
    { family: 'verification', name: 'POST /v1/validations', method: 'POST', path: '/v1/validations', headers: v, body: { kind: 'json', value: { phoneNumber: '420777123456' } } },
    { family: 'verification', name: 'POST /v1/validations/:token/verify', method: 'POST', path: `/v1/validations/{${ids.token}}/verify`, headers: v, body: { kind: 'json', value: { code: '000000' } } },
    { family: 'verification', name: 'PATCH /v1/validations/:token', method: 'PATCH', path: `/v1/validations/{${ids.token}}`, headers: v, body: { kind: 'json', value: { proof: 'ab'.repeat(32) } } },
    { family: 'verification', name: 'GET /v1/validations/:token', method: 'GET', path: `/v1/validations/{${ids.token}}`, headers: v, body: { kind: 'none' } },
    { family: 'verification', name: 'POST /v1/verify-proof', method: 'POST', path: '/v1/verify-proof', headers: {},
      body: { kind: 'json', value: { phoneNumber: '420777123456', token: ids.token, code: '123456', timestamp: ids.timestamp, proof: 'ab'.repeat(32) } } },
    { family: 'sandbox', name: 'POST /sandbox/inbound', method: 'POST', path: '/sandbox/inbound', headers: s,
      body: { kind: 'json', value: { gateway: 'sms', sender: '420777000111', recipient: '420700000001', body: 'hi' } } },
    { family: 'sandbox', name: 'GET /sandbox/messages', method: 'GET', path: '/sandbox/messages', headers: s, query: { phone_number: '420777123456', limit: '5' }, body: { kind: 'none' } },
    { family: 'admin', name: 'POST /admin/api/accounts', method: 'POST', path: '/admin/api/accounts', headers: bearer,
      body: { kind: 'json', value: { name: 'n', country: 'CZ', currency: 'CZK', credit_czk: 1, credit_eur: 0, default_sender: 'Shop' } } },
    { family: 'admin', name: 'GET /admin/api/accounts/:id', method: 'GET', path: `/admin/api/accounts/{${a}}`, headers: bearer, body: { kind: 'none' } },
    { family: 'admin', name: 'PATCH /admin/api/accounts/:id', method: 'PATCH', path: `/admin/api/accounts/{${a}}`, headers: bearer,
      body: { kind: 'json', value: { name: 'x', default_sender: 'Shop', verification_attempts: 5, verification_template: 'Code {code}', reply_window_days: 7, verification_secret: 'sixteen-chars-at-least' } } },
    { family: 'admin', name: 'POST /admin/api/accounts/:id/credit', method: 'POST', path: `/admin/api/accounts/{${a}}/credit`, headers: bearer, body: { kind: 'json', value: { czk: 1, eur: 1 } } },
    { family: 'admin', name: 'GET /admin/api/keys', method: 'GET', path: '/admin/api/keys', headers: bearer, query: { account_id: String(a) }, body: { kind: 'none' } },
    { family: 'admin', name: 'PATCH /admin/api/keys/:id', method: 'PATCH', path: `/admin/api/keys/{${ids.adminSubKey}}`, headers: bearer,
      body: { kind: 'json', value: { note: 'n', default_callback_url: 'https://example.com/a', webhook_secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', disabled: false } } },
    { family: 'admin', name: 'POST /admin/api/keys/:id/credit', method: 'POST', path: `/admin/api/keys/{${ids.adminSubKey}}/credit`, headers: bearer, body: { kind: 'json', value: { amount: 1 } } },
    { family: 'admin', name: 'GET /admin/api/prices', method: 'GET', path: '/admin/api/prices', headers: bearer, body: { kind: 'none' } },
    { family: 'admin', name: 'PUT /admin/api/prices', method: 'PUT', path: '/admin/api/prices', headers: bearer,
      body: { kind: 'json', value: [{ channel: 'sms', prefix: '999', operator: 0, price_czk: 1, price_eur: 0.04 }] } },
    { family: 'admin', name: 'POST /admin/api/numbers', method: 'POST', path: '/admin/api/numbers', headers: bearer, body: { kind: 'json', value: { account_id: a, value: '420700000001', channels: ['sms'] } } },
    { family: 'admin', name: 'GET /admin/api/webhooks/dead', method: 'GET', path: '/admin/api/webhooks/dead', headers: bearer, query: { key_id: '1', since: '2026-01-01T00:00:00Z' }, body: { kind: 'none' } },
    { family: 'admin', name: 'POST /admin/api/webhooks/replay', method: 'POST', path: '/admin/api/webhooks/replay', headers: bearer, body: { kind: 'json', value: { key_id: 1, since: '2026-01-01T00:00:00Z' } } },
    { family: 'admin', name: 'POST /admin/api/carriers', method: 'POST', path: '/admin/api/carriers', headers: bearer,
      body: { kind: 'json', value: { name: 'hostile1', url: 'smpp://user:pass@127.0.0.1:2775', routes: ['999'], enabled: false } } },
    { family: 'admin', name: 'POST /admin/api/carriers (kind, config)', method: 'POST', path: '/admin/api/carriers', headers: bearer,
      body: { kind: 'json', value: { name: 'hostile2', kind: 'smpp', config: { url: 'smpp://user:pass@127.0.0.1:2775' }, routes: ['998'], enabled: false } } },
    { family: 'admin', name: 'GET /admin/api/carriers', method: 'GET', path: '/admin/api/carriers', headers: bearer, body: { kind: 'none' } },
    { family: 'admin', name: 'POST /admin/api/senders', method: 'POST', path: '/admin/api/senders', headers: bearer,
      body: { kind: 'json', value: { account_id: a, family: 'viber', sender: 'Shop', connection: 'hostile1', credentials: { token: 'x' }, details: { a: 1 } } } },
    { family: 'admin', name: 'GET /admin/api/senders', method: 'GET', path: '/admin/api/senders', headers: bearer, query: { account_id: String(a) }, body: { kind: 'none' } },
    { family: 'admin', name: 'DELETE /admin/api/senders/:id', method: 'DELETE', path: '/admin/api/senders/{1}', headers: bearer, body: { kind: 'none' } },
    { family: 'callbacks', name: 'POST /callbacks/:kind/:connection', method: 'POST', path: '/callbacks/{smpp}/{hostile1}/x', headers: {},
      body: { kind: 'json', value: { event: 'delivered', message_token: 1, timestamp: 1 } } },
    { family: 'callbacks', name: 'GET /callbacks/:kind/:connection', method: 'GET', path: '/callbacks/{viber}/{hostile1}', headers: {}, query: { a: 'b' }, body: { kind: 'none' } },
    { family: 'admin', name: 'DELETE /admin/api/carriers/:name', method: 'DELETE', path: '/admin/api/carriers/{hostile1}', headers: bearer, body: { kind: 'none' } },
  ];
}

/** What a 2xx sending answer says was written: message rows and recipient rows. */
function acceptedRows(r: HostileRequest, a: Answer): { messages: number; recipients: number } | null {
  const body = r.body ? r.body.toString('utf8') : '';
  if (r.path.startsWith('/xml')) {
    return { messages: (a.text.match(/<RequestID>/g) ?? []).length, recipients: (a.text.match(/<Number>/g) ?? []).length };
  }
  if (r.path.startsWith('/v2/simple/message')) {
    return { messages: 1, recipients: 1 };
  }
  if (r.path.startsWith('/v2/message') && !r.path.startsWith('/v2/messages')) {
    return { messages: 1, recipients: a.json.accepted.length };
  }
  let sent: unknown;
  try {
    sent = JSON.parse(body.replace(/^\ufeff/, ''));
  } catch {
    return null;
  }
  const objects = sent as Array<{ to: unknown[] }>;
  const accepted: Array<{ key: string }> = a.json.accepted;
  return { messages: accepted.length, recipients: accepted.reduce((n, x) => n + objects[Number(x.key)]!.to.length, 0) };
}

/** Verification refusals that are meant to write: a wrong code consumes an attempt; a passed expiry is recorded. */
const WRITING_REFUSALS = new Set(['INVALID_CODE', 'TOO_MANY_ATTEMPTS', 'EXPIRED']);

interface Tally { requests: number; ok: number; refused: number; serverErrors: number; connectionErrors: number; byStatus: Map<number, number> }
const tallies = new Map<string, Tally>();
function tally(family: string, status: number): void {
  let t = tallies.get(family);
  if (!t) {
    t = { requests: 0, ok: 0, refused: 0, serverErrors: 0, connectionErrors: 0, byStatus: new Map() };
    tallies.set(family, t);
  }
  t.requests++;
  t.byStatus.set(status, (t.byStatus.get(status) ?? 0) + 1);
  if (status === 0) t.connectionErrors++;
  else if (status >= 500) t.serverErrors++;
  else if (status >= 400) t.refused++;
  else t.ok++;
}

function describe(r: HostileRequest, a: Answer, extra = ''): string {
  const body = r.body ? r.body.toString('utf8').slice(0, 300) : '';
  return `${r.method} ${r.path.slice(0, 200)} [${r.notes.join('; ')}] ${body} -> ${a.status} ${a.text.slice(0, 300)}${extra}`;
}

const SENDING = new Set(['sending', 'legacy v1', 'xml']);

/**
 * Whether the rows a request may write are known from its answer alone: a sending call writes
 * exactly the messages and recipients it accepted, a read (other than a verification read, which
 * may record an expiry) writes nothing. Such requests are checked in groups (one audit query per
 * group); any other request is checked on its own.
 */
function predictable(r: HostileRequest): boolean {
  return SENDING.has(r.family) || (r.method === 'GET' && r.family !== 'verification');
}

const GROUP = 25;
const sameWrites = (a: Map<string, number>, b: Map<string, number>) =>
  a.size === b.size && [...a].every(([t, n]) => b.get(t) === n);
const listWrites = (w: Map<string, number>) => [...w].map(([t, n]) => `${t}:${n}`).join(',') || 'nothing';

/** Send every request; collect what broke the rules. */
async function run(requests: HostileRequest[], deadline: number, minimum: number): Promise<{ problems: string[]; sent: number }> {
  const problems: string[] = [];
  let group: { lines: string[]; expected: Map<string, number> } = { lines: [], expected: new Map() };
  const flush = async () => {
    const writes = await writesSince();
    if (!sameWrites(writes, group.expected)) {
      problems.push(`${group.lines.length} requests wrote ${listWrites(writes)}, expected ${listWrites(group.expected)}:\n  ${group.lines.join('\n  ')}`);
    }
    group = { lines: [], expected: new Map() };
  };
  await writesSince();
  let sent = 0;
  for (const r of requests) {
    if (sent >= minimum && Date.now() > deadline) {
      break;
    }
    sent++;
    const grouped = predictable(r);
    if (!grouped && group.lines.length) {
      await flush();
    }
    const a = await send(r);
    tally(r.family, a.status);
    if (a.status >= 500 || a.status === 0) {
      problems.push(describe(r, a));
    }
    if (grouped) {
      group.lines.push(describe(r, a));
      if (a.status >= 200 && a.status < 300 && SENDING.has(r.family)) {
        const rows = acceptedRows(r, a) ?? { messages: -1, recipients: -1 };
        for (const [table, n] of [['messages', rows.messages], ['recipients', rows.recipients]] as const) {
          if (n !== 0) group.expected.set(table, (group.expected.get(table) ?? 0) + n);
        }
      }
      if (group.lines.length >= GROUP) {
        await flush();
      }
      continue;
    }
    const writes = await writesSince();
    if (a.status >= 300 && writes.size > 0) {
      const meant = r.family === 'verification' && WRITING_REFUSALS.has(a.json?.error);
      if (!(meant && [...writes.keys()].every((t) => t === 'validations'))) {
        problems.push(describe(r, a, ` wrote ${listWrites(writes)} although refused`));
      }
    }
  }
  await flush();
  return { problems, sent };
}

test('thousands of seeded malformed requests over every API family get no 5xx and write nothing when refused', async () => {
  const rng: Rng = seededRng(SEED);
  const all = templates();
  // Every template a few times first, whatever the seed and the budget; then the seeded mix.
  const requests: HostileRequest[] = [];
  for (const t of all) {
    for (let i = 0; i < 5; i++) {
      requests.push(mutate(rng, t));
    }
  }
  for (let i = 0; i < TOTAL; i++) {
    requests.push(mutate(rng, pick(rng, all)));
  }
  const started = Date.now();
  const { problems, sent } = await run(requests, started + BUDGET_MS, requests.length - TOTAL + MIN_REQUESTS);
  const rows = [...tallies].sort(([a], [b]) => a.localeCompare(b)).map(([family, t]) => ({
    family, requests: t.requests, '2xx': t.ok, '4xx': t.refused, '5xx': t.serverErrors, 'no answer': t.connectionErrors,
    statuses: [...t.byStatus].sort(([x], [y]) => x - y).map(([s, n]) => `${s}:${n}`).join(' '),
  }));
  console.log(`hostile input: seed ${SEED}, ${sent} of ${requests.length} requests in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  console.table(rows);
  if (process.env.HOSTILE_REPORT) {
    writeFileSync(process.env.HOSTILE_REPORT, problems.join('\n') + '\n');
  }
  assert.deepEqual(problems.slice(0, 20), [], `${problems.length} problems`);
});

// ---- the explicit cases of issue 22 item 7 ----

async function adminCall(method: string, path: string, body?: unknown): Promise<Answer> {
  return send({ method, path: `/admin/api${path}`, headers: { ...bearer, 'content-type': 'application/json' }, ...(body !== undefined && { body: Buffer.from(JSON.stringify(body)) }) });
}
async function jsonCall(method: string, path: string, headers: Record<string, string>, body: unknown): Promise<Answer> {
  return send({ method, path, headers: { ...headers, 'content-type': 'application/json' }, body: Buffer.from(JSON.stringify(body)) });
}

test('a NUL character in any sandbox inbound field is refused with a 400 naming the field', async () => {
  const valid = { gateway: 'sms', sender: '420777000111', recipient: '420700000001', body: 'hi' };
  await writesSince();
  for (const field of Object.keys(valid)) {
    const a = await jsonCall('POST', '/sandbox/inbound', { 'x-api-key': ids.sendKey }, { ...valid, [field]: `${valid[field as keyof typeof valid]}\u0000` });
    assert.equal(a.status, 400, a.text);
    assert.equal(a.json.success, false);
    assert.match(a.json.message, new RegExp(`^${field}: `), a.text);
  }
  const surrogate = await jsonCall('POST', '/sandbox/inbound', { 'x-api-key': ids.sendKey }, { ...valid, body: 'x\ud800' });
  assert.equal(surrogate.status, 400, surrogate.text);
  assert.match(surrogate.json.message, /^body: must not contain NUL characters or unpaired surrogates/);
  assert.equal((await writesSince()).size, 0);
});

test('a NUL character in an admin API string is refused with a 400 naming the field', async () => {
  const cases: Array<[string, string, unknown, string]> = [
    ['POST', '/accounts', { currency: 'CZK', name: 'a\u0000b' }, 'name'],
    ['PATCH', `/accounts/${ids.adminAccount}`, { verification_template: 'Code {code}\u0000' }, 'verification_template'],
    ['PATCH', `/accounts/${ids.adminAccount}`, { verification_secret: 'sixteen-chars-at-least\u0000' }, 'verification_secret'],
    ['PATCH', `/keys/${ids.adminSubKey}`, { note: '\u0000' }, 'note'],
    ['POST', '/numbers', { account_id: ids.adminAccount, value: '4207\u000000001' }, 'value'],
    ['POST', '/carriers', { name: 'nul', url: 'smpp://user:pa\u0000ss@127.0.0.1:2775' }, 'url'],
  ];
  await writesSince();
  for (const [method, path, body, field] of cases) {
    const a = await adminCall(method, path, body);
    assert.equal(a.status, 400, `${method} ${path}: ${a.text}`);
    assert.equal(a.json.error, 'VALIDATION');
    assert.match(a.json.message, new RegExp(`^${field}: `), a.text);
  }
  // Values that normalise to nothing: no number or name would be assigned or sent from ("" was stored).
  for (const value of ['   ', '()', '-', '00']) {
    const a = await adminCall('POST', '/numbers', { account_id: ids.adminAccount, value, channels: ['sms'] });
    assert.equal(a.status, 400, `${JSON.stringify(value)}: ${a.text}`);
    assert.match(a.json.message, /^value: .* holds no digits or name$/);
  }
  const blank = await adminCall('POST', '/senders', { account_id: ids.adminAccount, family: 'viber', sender: '  ', connection: 'x' });
  assert.equal(blank.status, 400, blank.text);
  assert.match(blank.json.message, /^sender: must not be blank/);
  assert.equal((await writesSince()).size, 0);
});

test('a malformed percent-escape in a path is a 400 naming the path in each family\'s shape', async () => {
  const cases: Array<[string, string, Record<string, string>, (a: Answer) => void]> = [
    ['GET', '/admin/api/accounts/%E0%A4%A', bearer, (a) => assert.deepEqual(a.json, { error: 'BAD_REQUEST', message: 'path: malformed percent-escape in /admin/api/accounts/%E0%A4%A' })],
    ['POST', '/admin/api/accounts/%E0%A4%A/credit', bearer, (a) => assert.equal(a.json.error, 'BAD_REQUEST')],
    ['PATCH', '/admin/api/keys/%zz', bearer, (a) => assert.match(a.json.message, /^path: malformed percent-escape in \/admin\/api\/keys\/%zz$/)],
    ['DELETE', '/admin/api/carriers/%ED%A0%80', bearer, (a) => assert.equal(a.json.error, 'BAD_REQUEST')],
    ['DELETE', '/admin/api/carriers/%00', bearer, (a) => assert.deepEqual(a.json, { error: 'BAD_REQUEST', message: 'path: must not contain NUL characters (%00): /admin/api/carriers/%00' })],
    ['GET', '/v1/validations/abc%00', { 'x-api-key': ids.verifyKey }, (a) => assert.equal(a.json.error, 'INVALID_REQUEST')],
    ['GET', '/v1/validations/%E0%A4%A', { 'x-api-key': ids.verifyKey }, (a) => assert.deepEqual(a.json, { error: 'INVALID_REQUEST', message: 'path: malformed percent-escape in /v1/validations/%E0%A4%A' })],
    ['POST', '/v1/validations/%/verify', { 'x-api-key': ids.verifyKey }, (a) => assert.equal(a.json.error, 'INVALID_REQUEST')],
    // The sending API's lookup: its own error body (`Message`), and the key checked first.
    ['GET', '/v2/messages/%E0%A4', { 'x-api-key': ids.sendKey }, (a) => assert.deepEqual(a.json, { Message: 'path: malformed percent-escape in /v2/messages/%E0%A4' })],
    ['GET', '/v2/messages/%zz', {}, (a) => assert.deepEqual(a.json, { Message: 'User is not authorized to access this resource with an explicit deny' })],
  ];
  for (const [method, path, headers, check] of cases) {
    const a = await send({ method, path, headers: { ...headers, 'content-type': 'application/json' }, body: Buffer.from('{}') });
    assert.equal(a.status, 400, `${method} ${path}: ${a.text}`);
    check(a);
  }
});

test('an out-of-range date is a 400 naming since', async () => {
  for (const since of ['-271821-04-20T00:00:00Z', '+275760-09-13T00:00:00Z', '0001-01-01T00:00:00Z', '+010000-01-01T00:00:00Z']) {
    const list = await send({ method: 'GET', path: `/admin/api/webhooks/dead?since=${encodeURIComponent(since)}`, headers: bearer });
    assert.equal(list.status, 400, `${since}: ${list.text}`);
    assert.match(list.json.message, /^since: /, list.text);
    const replay = await adminCall('POST', '/webhooks/replay', { key_id: 1, since });
    assert.equal(replay.status, 400, `${since}: ${replay.text}`);
    assert.match(replay.json.message, /since/, replay.text);
  }
  const fine = await send({ method: 'GET', path: '/admin/api/webhooks/dead?since=2026-01-01T00:00:00Z', headers: bearer });
  assert.equal(fine.status, 200, fine.text);
});

test('credit added until the balance would overflow is refused with a 400 naming the field and changes nothing', async () => {
  const account = (await svc.createAccount({ country: 'CZ' })).accountId;
  for (const [field, amount] of [['czk', 1e12], ['eur', -1e12]] as const) {
    let last: Answer | null = null;
    let refused: Answer | null = null;
    for (let i = 0; i < 200 && !refused; i++) {
      const a = await adminCall('POST', `/accounts/${account}/credit`, { [field]: amount });
      if (a.status === 200) {
        last = a;
      } else {
        refused = a;
      }
    }
    assert.ok(last && refused, 'some top-ups pass, then one is refused');
    assert.equal(refused.status, 400, refused.text);
    assert.match(refused.json.message, new RegExp(`^${field}: the resulting balance would be out of range`));
    const balance = (await adminCall('GET', `/accounts/${account}`)).json;
    assert.equal(balance[`credit_${field}`], last.json[`credit_${field}`], 'the refused top-up changed nothing');
  }
  const both = await adminCall('POST', `/accounts/${account}/credit`, { czk: -1, eur: -1e12 });
  assert.equal(both.status, 400, both.text);
  assert.match(both.json.message, /^eur: /);
  // An own-credit key's balance has the same bound.
  let refused: Answer | null = null;
  for (let i = 0; i < 200 && !refused; i++) {
    const a = await adminCall('POST', `/keys/${ids.adminSubKey}/credit`, { amount: 1e12 });
    if (a.status !== 200) refused = a;
  }
  assert.equal(refused?.status, 400, refused?.text);
  assert.match(refused!.json.message, /^amount: the resulting balance would be out of range/);
});

test('a __proto__ key is refused like any unknown key in every JSON body', async () => {
  const s = { 'x-api-key': ids.sendKey };
  const raw = (path: string, headers: Record<string, string>, text: string) =>
    send({ method: 'POST', path, headers: { ...headers, 'content-type': 'application/json' }, body: Buffer.from(text) });
  await writesSince();
  const batch = await raw('/v2/messages', s, '[{"body":"x","to":[{"phone_number":"420777123456"}],"__proto__":{"tag":"priority"}},'
    + '{"body":"x","to":[{"phone_number":"420777123456","__proto__":{}}]},{"body":"x","to":[{"phone_number":"420777123456"}],"constructor":1}]');
  assert.equal(batch.status, 200, batch.text);
  assert.deepEqual(batch.json.rejected, [
    { key: '0', message: '__proto__: is not allowed' },
    { key: '1', message: 'to[0].__proto__: is not allowed' },
    { key: '2', message: 'constructor: is not allowed' },
  ]);
  const single = await raw('/v2/message', s, '{"body":"x","to":[{"phone_number":"420777123456"}],"flow":[{"sms":{"__proto__":{"sender":"X"}}}]}');
  assert.equal(single.status, 400, single.text);
  assert.deepEqual(single.json, { Message: 'flow[0].sms.__proto__: is not allowed' });
  const v1 = await raw('/v1/messages', s, '[{"body":"x","to":[{"phone_number":"420777123456"}],"delivery_time":{"__proto__":{"tz":"UTC"}}}]');
  assert.deepEqual(v1.json.rejected, [{ key: '0', message: 'delivery_time.__proto__: is not allowed' }]);
  const rest = await raw('/v1/apikey/update', { 'x-api-key': ids.restKey }, '{"note":"x","__proto__":{"note":"y"}}');
  assert.equal(rest.status, 400, rest.text);
  assert.match(rest.json.message, /^__proto__: is not an allowed field/);
  const admin = await raw(`/admin/api/accounts/${ids.adminAccount}/credit`, bearer, '{"czk":1,"__proto__":{"eur":5}}');
  assert.equal(admin.status, 400, admin.text);
  assert.deepEqual(admin.json, { error: 'VALIDATION', message: '__proto__: is not allowed' });
  const sandbox = await raw('/sandbox/inbound', s, '{"gateway":"sms","sender":"1","recipient":"2","body":"x","__proto__":{}}');
  assert.equal(sandbox.status, 400, sandbox.text);
  assert.equal(sandbox.json.message, '__proto__: is not allowed');
  assert.equal((await writesSince()).size, 0);
  // In payload, which takes any object, the key is kept as written.
  const kept = await raw('/v2/message', s, '{"body":"x","to":[{"phone_number":"420777777777"}],"payload":{"__proto__":{"a":1}}}');
  assert.equal(kept.status, 200, kept.text);
  const [row] = await svc.sql<{ payload: string }>('SELECT payload FROM messages ORDER BY created_at DESC LIMIT 1');
  assert.equal(row!.payload, '{"__proto__":{"a":1}}');
});

test('a URL that WHATWG URL cannot parse or with a port out of range is refused where it is accepted', async () => {
  const s = { 'x-api-key': ids.sendKey };
  const viber = (url: string) => ({ to: [{ phone_number: '420777123456' }], flow: [{ viber: { sender: 'Shop', body: 'x', buttons: [{ title: 'Go', url }] } }] });
  await writesSince();
  const batch = await jsonCall('POST', '/v2/messages', s, [
    viber('http://%zz/'), viber('http://example.com:99999/'), viber('https://example.com:0/'),
    { body: 'x', to: [{ phone_number: '420777123456' }], callback: 'http://%zz/' },
    { body: 'x', to: [{ phone_number: '420777123456' }], callback: 'https://example.com:65536/hook' },
  ]);
  assert.equal(batch.status, 200, batch.text);
  assert.deepEqual(batch.json.rejected, [
    { key: '0', message: 'flow[0].viber.buttons[0].url: URL is not valid' },
    { key: '1', message: 'flow[0].viber.buttons[0].url: URL is not valid' },
    { key: '2', message: 'flow[0].viber.buttons[0].url: URL port must be 1-65535' },
    { key: '3', message: 'callback: URL is not valid' },
    { key: '4', message: 'callback: URL is not valid' },
  ]);
  for (const url of ['http://%zz/', 'http://example.com:99999/', 'http://example.com:0/']) {
    const rest = await jsonCall('POST', '/v1/apikey/update', { 'x-api-key': ids.restKey }, { default_callback_url: url });
    assert.equal(rest.status, 400, rest.text);
    assert.match(rest.json.message, /^default_callback_url: URL/);
    const admin = await adminCall('PATCH', `/keys/${ids.adminSubKey}`, { default_callback_url: url });
    assert.equal(admin.status, 400, admin.text);
    assert.match(admin.json.message, /^default_callback_url: /);
  }
  assert.equal((await writesSince()).size, 0);
});

/** Upload `size` bytes over a raw socket (optionally chunked) and read the whole answer, or what the socket ended with. */
function upload(path: string, headers: Record<string, string>, size: number, chunked = false): Promise<{ status: number; headers: string; body: string; error?: string }> {
  const url = new URL(svc.url);
  return new Promise((resolve) => {
    const socket = net.connect(Number(url.port), url.hostname);
    let received = '';
    let error: string | undefined;
    socket.on('data', (d) => { received += d.toString('utf8'); });
    socket.on('error', (err: NodeJS.ErrnoException) => { error = err.code ?? err.message; });
    socket.on('close', () => {
      const [head = '', body = ''] = received.split('\r\n\r\n');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
      resolve({ status, headers: head, body, ...(error !== undefined && { error }) });
    });
    socket.setTimeout(20_000, () => socket.destroy());
    const head = Object.entries({ ...headers, host: url.host, ...(chunked ? { 'transfer-encoding': 'chunked' } : { 'content-length': String(size) }) })
      .map(([k, v]) => `${k}: ${v}`).join('\r\n');
    socket.write(`POST ${path} HTTP/1.1\r\n${head}\r\n\r\n`);
    const piece = Buffer.alloc(64 * 1024, 'a');
    let sent = 0;
    const pump = () => {
      while (sent < size) {
        const n = Math.min(piece.length, size - sent);
        sent += n;
        const data = chunked ? Buffer.concat([Buffer.from(`${n.toString(16)}\r\n`), piece.subarray(0, n), Buffer.from('\r\n')]) : piece.subarray(0, n);
        if (socket.destroyed) return;
        if (!socket.write(data)) {
          socket.once('drain', pump);
          return;
        }
      }
      if (chunked) socket.write('0\r\n\r\n');
    };
    pump();
  });
}

test('a client uploading a body over the size cap receives the 400 in the family\'s shape', async () => {
  // Over the cap and over what loopback socket buffers absorb, under the 8 MiB read-and-drop bound:
  // a server that stops reading leaves such a client stuck writing (or reset) instead of answered.
  const size = 7 * 1024 * 1024;
  const json = { 'content-type': 'application/json' };
  const cases: Array<[string, Record<string, string>, RegExp]> = [
    ['/v2/messages', { ...json, 'x-api-key': ids.sendKey }, /^\{"Message":"Request body too large \(limit 256 KB\)"\}$/],
    ['/v2/message', { ...json, 'x-api-key': ids.sendKey }, /"Message":"Request body too large/],
    ['/v1/apikey/update', { ...json, 'x-api-key': ids.restKey }, /^\{"success":false,"message":"Request body too large/],
    ['/v1/validations', { ...json, 'x-api-key': ids.verifyKey }, /^\{"error":"PAYLOAD_TOO_LARGE"/],
    ['/admin/api/accounts', { ...json, ...bearer }, /"message":"Request body too large/],
    ['/sandbox/inbound', { ...json, 'x-api-key': ids.sendKey }, /^\{"success":false/],
  ];
  for (const chunked of [false, true]) {
    for (const [path, headers, body] of cases) {
      const a = await upload(path, headers, size, chunked);
      assert.ok(a.status === 400 || a.status === 413, `${path} chunked=${chunked}: ${a.status} ${a.error ?? ''} ${a.headers}`);
      assert.match(a.headers, /connection: close/i);
      assert.match(a.body.replace(/^[0-9a-f]+\r\n/, '').replace(/\r\n0\r\n$/, ''), body, `${path}: ${a.body}`);
    }
  }
  const xml = await upload('/xml', { 'content-type': 'application/x-www-form-urlencoded' }, 3 * 1024 * 1024);
  assert.equal(xml.status, 400, `${xml.status} ${xml.error ?? ''}`);
  assert.match(xml.body, /ID="102"/);
  // Far beyond the bound the answer comes at once and the connection is dropped; the service goes on.
  const huge = await upload('/v2/messages', { ...json, 'x-api-key': ids.sendKey }, 64 * 1024 * 1024);
  assert.ok(huge.status === 400 || huge.status === 0, `${huge.status}`);
  const after = await send({ method: 'GET', path: '/v1/credit', headers: { 'x-api-key': ids.restKey } });
  assert.equal(after.status, 200);
});

test('an upload the client abandons is logged as one info line without a stack', async () => {
  const url = new URL(svc.url);
  const before = logLines.length;
  await new Promise<void>((resolve) => {
    const socket = net.connect(Number(url.port), url.hostname, () => {
      socket.write(`POST /v2/messages HTTP/1.1\r\nhost: ${url.host}\r\ncontent-type: application/json\r\nx-api-key: ${ids.sendKey}\r\ncontent-length: 100000\r\n\r\n[{"body":`);
      setTimeout(() => { socket.destroy(); resolve(); }, 200);
    });
  });
  await new Promise((r) => setTimeout(r, 300));
  const lines = logLines.slice(before);
  const aborted = lines.filter((l) => l.msg === 'client closed the connection during the upload');
  assert.equal(aborted.length, 1, JSON.stringify(lines));
  assert.equal(aborted[0]!.level, 30);
  assert.equal(aborted[0]!.err, undefined);
  assert.ok(lines.every((l) => l.level < 50), JSON.stringify(lines));
});

test('an abandoned upload to a path that carries a secret is logged with the secret masked', async () => {
  const url = new URL(svc.url);
  const callbackToken = 'AbandonedCallbackToken0123456789abcdef';
  const paths = [`/callbacks/viber/some-connection/${callbackToken}`, `/v1/validations/${ids.token}/verify`];
  const before = logLines.length;
  for (const path of paths) {
    await new Promise<void>((resolve) => {
      const socket = net.connect(Number(url.port), url.hostname, () => {
        socket.write(`POST ${path} HTTP/1.1\r\nhost: ${url.host}\r\ncontent-type: application/json\r\nx-api-key: ${ids.verifyKey}\r\ncontent-length: 100000\r\n\r\n{"code":`);
        setTimeout(() => { socket.destroy(); resolve(); }, 200);
      });
    });
  }
  await new Promise((r) => setTimeout(r, 300));
  const lines = logLines.slice(before);
  const aborted = lines.filter((l) => l.msg === 'client closed the connection during the upload') as Array<{ path?: string }>;
  assert.deepEqual(aborted.map((l) => l.path), ['/callbacks/viber/some-connection/***', '/v1/validations/***/verify'], JSON.stringify(lines));
  const logged = JSON.stringify(lines);
  assert.ok(!logged.includes(callbackToken) && !logged.includes(ids.token), logged);
});

test('a client that sends its headers or its body a byte at a time is answered 408 and cut off at HTTP_REQUEST_TIMEOUT_MS', async () => {
  const url = new URL(svc.url);
  const trickle = (head: string, drip: string) => new Promise<{ answer: string; ms: number }>((resolve, reject) => {
    const started = Date.now();
    let answer = '';
    const socket = net.connect(Number(url.port), url.hostname, () => {
      socket.write(head);
      let i = 0;
      const timer = setInterval(() => { if (!socket.destroyed) socket.write(drip[i++ % drip.length]!); }, 500);
      socket.on('close', () => { clearInterval(timer); resolve({ answer, ms: Date.now() - started }); });
    });
    socket.on('data', (chunk: Buffer) => { answer += chunk.toString('latin1'); });
    socket.on('error', () => undefined);
    setTimeout(() => { socket.destroy(); reject(new Error(`still open after 20 s: ${answer}`)); }, 20_000).unref();
  });
  const [headers, body] = await Promise.all([
    trickle(`GET /v1/credit HTTP/1.1\r\nhost: ${url.host}\r\n`, 'x-a: b\r\n'),
    trickle(`POST /v2/messages HTTP/1.1\r\nhost: ${url.host}\r\ncontent-type: application/json\r\nx-api-key: ${ids.sendKey}\r\ncontent-length: 100000\r\n\r\n`, ' '),
  ]);
  for (const [name, r] of [['headers', headers], ['body', body]] as const) {
    assert.match(r.answer, /^HTTP\/1\.1 408 /, `${name}: ${r.answer}`);
    // 5 s, checked every 1.25 s; Node's defaults would have kept the connection 60 s (headers) and 300 s (body).
    assert.ok(r.ms >= 4_500 && r.ms < 12_000, `${name}: cut off after ${r.ms} ms`);
  }
});

test('nothing a client sent was logged at error level', () => {
  const errors = logLines.filter((l) => l.level >= 50);
  assert.deepEqual(errors.slice(0, 5), []);
});
