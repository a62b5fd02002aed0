import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LookupFunction } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { checkCallbackUrl, isPublicAddress } from '../../shared/net/ssrf.js';
import { WebhookClient, createGuardedLookup, parseRetryAfter } from '../../shared/webhooks/http.js';
import { generateWebhookSecret, isValidWebhookSecret, signWebhook } from '../../shared/webhooks/sign.js';

// ---------------------------------------------------------------------------
// helpers

interface SeenRequest {
  method: string | undefined;
  url: string | undefined;
  headers: http.IncomingHttpHeaders;
  body: string;
}

interface TestServer {
  port: number;
  base: string;
  requests: SeenRequest[];
  connections: number;
  close(): Promise<void>;
}

type Handler = (req: http.IncomingMessage, res: http.ServerResponse, body: string) => void;

async function startServer(handler: Handler): Promise<TestServer> {
  const requests: SeenRequest[] = [];
  const server = http.createServer((req, res) => {
    res.on('error', () => undefined);
    req.on('error', () => undefined);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      requests.push({ method: req.method, url: req.url, headers: req.headers, body });
      handler(req, res, body);
    });
  });
  const state = { connections: 0 };
  server.on('connection', (sock) => {
    state.connections++;
    sock.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    base: `http://127.0.0.1:${port}`,
    requests,
    get connections() {
      return state.connections;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A port that was just listening and is now closed (connection refused). */
async function closedPort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

// ---------------------------------------------------------------------------
// checkCallbackUrl / isPublicAddress

describe('checkCallbackUrl', () => {
  const refusedHosts: Array<[string, string]> = [
    ['loopback v4', 'http://127.0.0.1/hook'],
    ['loopback v4 other', 'http://127.5.6.7:8080/hook'],
    ['loopback v4 decimal form', 'http://2130706433/hook'],
    ['loopback v4 hex form', 'http://0x7f.0.0.1/hook'],
    ['loopback v4 trailing dot', 'http://127.0.0.1./hook'],
    ['loopback v6', 'http://[::1]/hook'],
    ['private 10/8', 'http://10.1.2.3/'],
    ['private 172.16/12 low', 'http://172.16.0.1/'],
    ['private 172.16/12 high', 'http://172.31.255.254/'],
    ['private 192.168/16', 'https://192.168.1.1/'],
    ['link-local v4 (metadata)', 'http://169.254.169.254/latest/meta-data'],
    ['link-local v6', 'http://[fe80::1]/'],
    ['CGNAT 100.64/10', 'http://100.64.0.1/'],
    ['CGNAT 100.64/10 high', 'http://100.127.255.254/'],
    ['unique-local fc00::/7', 'http://[fc00::1]/'],
    ['unique-local fd00::', 'http://[fd12:3456::1]/'],
    ['unspecified v4', 'http://0.0.0.0/'],
    ['unspecified v4 /8', 'http://0.1.2.3/'],
    ['unspecified v6', 'http://[::]/'],
    ['multicast v4', 'http://224.0.0.1/'],
    ['multicast v6', 'http://[ff02::1]/'],
    ['broadcast', 'http://255.255.255.255/'],
    ['reserved 240/4', 'http://240.0.0.1/'],
    ['TEST-NET-1', 'http://192.0.2.10/'],
    ['documentation v6', 'http://[2001:db8::1]/'],
    ['mapped loopback', 'http://[::ffff:127.0.0.1]/'],
    ['mapped private 10/8', 'http://[::ffff:10.0.0.1]/'],
    ['mapped private 192.168', 'http://[::ffff:c0a8:0101]/'],
    ['mapped link-local', 'http://[::ffff:169.254.169.254]/'],
    ['mapped CGNAT', 'http://[::ffff:100.64.0.1]/'],
    ['mapped unspecified', 'http://[::ffff:0.0.0.0]/'],
    ['IPv4-compatible loopback', 'http://[::127.0.0.1]/'],
    ['NAT64 of loopback', 'http://[64:ff9b::127.0.0.1]/'],
    ['localhost', 'http://localhost/'],
    ['localhost with port', 'http://localhost:3000/x'],
    ['LOCALHOST upper + trailing dot', 'http://LOCALHOST./x'],
    ['sub.localhost', 'http://api.localhost/x'],
  ];
  for (const [name, url] of refusedHosts) {
    it(`refuses ${name}: ${url}`, () => {
      const r = checkCallbackUrl(url, false);
      assert.equal(r.ok, false, url);
    });
  }

  const badSyntax: Array<[string, string]> = [
    ['ftp scheme', 'ftp://example.com/file'],
    ['javascript scheme', 'javascript:alert(1)'],
    ['file scheme', 'file:///etc/passwd'],
    ['data scheme', 'data:text/plain,hi'],
    ['no host', 'http://'],
    ['no host with port', 'http://:8080/x'],
    ['not a URL', 'not a url'],
    ['relative', '/hook'],
    ['empty', ''],
    ['too long', `https://example.com/${'a'.repeat(2100)}`],
  ];
  for (const [name, url] of badSyntax) {
    it(`refuses ${name} even with allowPrivate`, () => {
      assert.equal(checkCallbackUrl(url, false).ok, false, url);
      assert.equal(checkCallbackUrl(url, true).ok, false, url);
    });
  }

  it('reports a reason on refusal', () => {
    const r = checkCallbackUrl('ftp://example.com/', false);
    assert.ok(!r.ok && r.reason.length > 0);
  });

  it('accepts a URL of exactly 2048 characters', () => {
    const base = 'https://example.com/';
    const url = base + 'a'.repeat(2048 - base.length);
    assert.equal(url.length, 2048);
    assert.equal(checkCallbackUrl(url, false).ok, true);
  });

  const allowed = [
    'https://8.8.8.8/hook',
    'http://1.1.1.1:8080/x?y=1',
    'https://[2606:4700:4700::1111]/hook',
    'http://[::ffff:8.8.8.8]/hook',
    'https://example.com/webhooks/sms',
    'https://hooks.example.co.uk:8443/a/b?c=d#frag',
    'https://user:secret@example.com/hook',
    'http://172.32.0.1/', // just outside 172.16/12
    'http://100.128.0.1/', // just outside 100.64/10
    'https://localhost.example.com/', // only *.localhost is special
  ];
  for (const url of allowed) {
    it(`accepts ${url}`, () => {
      const r = checkCallbackUrl(url, false);
      assert.equal(r.ok, true, url);
      if (r.ok) assert.ok(r.url instanceof URL);
    });
  }

  it('allowPrivate=true lets loopback / private / localhost through', () => {
    for (const url of ['http://127.0.0.1:3000/x', 'http://[::1]/', 'http://10.0.0.1/', 'http://localhost:8080/']) {
      assert.equal(checkCallbackUrl(url, true).ok, true, url);
    }
  });
});

describe('isPublicAddress', () => {
  it('classifies resolved addresses', () => {
    const pub = ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '::ffff:8.8.8.8', '172.32.0.1'];
    const priv = [
      '127.0.0.1', '::1', '10.0.0.1', '172.16.5.5', '192.168.0.1', '169.254.1.1', 'fe80::1', 'fe80::1%eth0',
      '100.64.0.1', 'fc00::1', 'fd00::1', '0.0.0.0', '::', '224.0.0.251', 'ff02::1', '255.255.255.255',
      '240.0.0.1', '::ffff:127.0.0.1', '::ffff:192.168.1.1', '::ffff:169.254.169.254',
      '', 'localhost', 'example.com', '0x7f.1', '2130706433',
    ];
    for (const ip of pub) assert.equal(isPublicAddress(ip), true, ip);
    for (const ip of priv) assert.equal(isPublicAddress(ip), false, ip);
  });
});

describe('createGuardedLookup', () => {
  const fake =
    (answers: Array<{ address: string; family: number }>): LookupFunction =>
    (_host, options, cb) => {
      if (options.all) cb(null, answers);
      else cb(null, answers[0]?.address ?? '', answers[0]?.family);
    };

  it('refuses private single answers and passes public ones', async () => {
    const priv = createGuardedLookup(fake([{ address: '10.0.0.5', family: 4 }]));
    const err = await new Promise<NodeJS.ErrnoException | null>((resolve) => priv('x.example', {}, (e) => resolve(e)));
    assert.ok(err);
    const pub = createGuardedLookup(fake([{ address: '8.8.8.8', family: 4 }]));
    const addr = await new Promise<unknown>((resolve) => pub('x.example', {}, (_e, a) => resolve(a)));
    assert.equal(addr, '8.8.8.8');
  });

  it('filters private entries from all:true answers, refusing when none remain', async () => {
    const mixed = createGuardedLookup(
      fake([
        { address: '127.0.0.1', family: 4 },
        { address: '93.184.216.34', family: 4 },
        { address: '::1', family: 6 },
      ]),
    );
    const list = await new Promise<unknown>((resolve) => mixed('x.example', { all: true }, (_e, a) => resolve(a)));
    assert.deepEqual(list, [{ address: '93.184.216.34', family: 4 }]);
    const allPriv = createGuardedLookup(fake([{ address: '::ffff:10.0.0.1', family: 6 }]));
    const err = await new Promise<unknown>((resolve) => allPriv('x.example', { all: true }, (e) => resolve(e)));
    assert.ok(err instanceof Error);
  });
});

describe('parseRetryAfter', () => {
  it('parses seconds and HTTP dates, ignores junk', () => {
    const now = Date.parse('2025-01-01T00:00:00Z');
    assert.equal(parseRetryAfter('120', now), 120_000);
    assert.equal(parseRetryAfter('0', now), 0);
    assert.equal(parseRetryAfter('Wed, 01 Jan 2025 00:00:30 GMT', now), 30_000);
    assert.equal(parseRetryAfter('Tue, 31 Dec 2024 00:00:00 GMT', now), 0); // past → 0
    assert.equal(parseRetryAfter(undefined, now), undefined);
    assert.equal(parseRetryAfter('soon', now), undefined);
    assert.equal(parseRetryAfter('-5', now), undefined);
    assert.equal(parseRetryAfter('1.5', now), undefined);
  });
});

// ---------------------------------------------------------------------------
// WebhookClient.post against real local servers

describe('WebhookClient.post', () => {
  let client: WebhookClient;
  const servers: TestServer[] = [];
  const serve = async (h: Handler): Promise<TestServer> => {
    const s = await startServer(h);
    servers.push(s);
    return s;
  };

  before(() => {
    client = new WebhookClient({ allowPrivate: true, timeoutMs: 3_000 });
  });
  after(async () => {
    await client.close();
    await Promise.all(servers.map((s) => s.close()));
  });

  it('200 is ok; body, default headers and extra headers arrive; response body is discarded', async () => {
    const s = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('thanks! '.repeat(100));
    });
    const payload = JSON.stringify({ event: 'message.delivered', id: 'm_1' });
    const r = await client.post(`${s.base}/hooks/a?x=1`, payload, { 'webhook-id': 'msg_1', 'X-Extra': 'yes' });
    assert.deepEqual(r, { ok: true, status: 200 });
    assert.equal(s.requests.length, 1);
    const seen = s.requests[0]!;
    assert.equal(seen.method, 'POST');
    assert.equal(seen.url, '/hooks/a?x=1');
    assert.equal(seen.body, payload);
    assert.equal(seen.headers['content-type'], 'application/json');
    assert.equal(seen.headers['user-agent'], 'switchboard-webhook/1.0');
    assert.equal(seen.headers['webhook-id'], 'msg_1');
    assert.equal(seen.headers['x-extra'], 'yes');
    assert.equal(seen.headers['authorization'], undefined);
  });

  it('any 2xx is ok (204)', async () => {
    const s = await serve((_req, res) => {
      res.writeHead(204);
      res.end();
    });
    const r = await client.post(s.base, '{}');
    assert.equal(r.ok, true);
    assert.equal(r.status, 204);
  });

  it('custom User-Agent', async () => {
    const s = await serve((_req, res) => res.end('ok'));
    const c = new WebhookClient({ allowPrivate: true, userAgent: 'custom/2' });
    try {
      const r = await c.post(s.base, '{}');
      assert.equal(r.ok, true);
      assert.equal(s.requests[0]?.headers['user-agent'], 'custom/2');
    } finally {
      await c.close();
    }
  });

  it('500 → ok false with status', async () => {
    const s = await serve((_req, res) => {
      res.writeHead(500);
      res.end('boom');
    });
    const r = await client.post(s.base, '{}');
    assert.equal(r.ok, false);
    assert.equal(r.status, 500);
    assert.equal(r.retryAfterMs, undefined);
    assert.match(r.error ?? '', /500/);
  });

  it('refused connection → ok false with error, status null', async () => {
    const port = await closedPort();
    const r = await client.post(`http://127.0.0.1:${port}/x`, '{}');
    assert.equal(r.ok, false);
    assert.equal(r.status, null);
    assert.match(r.error ?? '', /ECONNREFUSED/);
  });

  it('times out against a server that never answers', async () => {
    const s = await serve(() => {
      /* never respond */
    });
    const c = new WebhookClient({ allowPrivate: true, timeoutMs: 300 });
    try {
      const t0 = Date.now();
      const r = await c.post(s.base, '{}');
      const elapsed = Date.now() - t0;
      assert.equal(r.ok, false);
      assert.equal(r.status, null);
      assert.match(r.error ?? '', /time/i);
      assert.ok(elapsed >= 250 && elapsed < 2_000, `elapsed ${elapsed}`);
    } finally {
      await c.close().catch(() => undefined);
    }
  });

  it('Retry-After in seconds', async () => {
    const s = await serve((_req, res) => {
      res.writeHead(429, { 'retry-after': '7' });
      res.end();
    });
    const r = await client.post(s.base, '{}');
    assert.equal(r.ok, false);
    assert.equal(r.status, 429);
    assert.equal(r.retryAfterMs, 7_000);
  });

  it('Retry-After as HTTP date', async () => {
    const at = new Date(Date.now() + 60_000);
    const s = await serve((_req, res) => {
      res.writeHead(503, { 'retry-after': at.toUTCString() });
      res.end();
    });
    const r = await client.post(s.base, '{}');
    assert.equal(r.ok, false);
    assert.equal(r.status, 503);
    assert.ok(r.retryAfterMs !== undefined, 'retryAfterMs set');
    // toUTCString drops milliseconds, so allow a couple of seconds of slack.
    assert.ok(r.retryAfterMs > 55_000 && r.retryAfterMs <= 60_000, `retryAfterMs ${r.retryAfterMs}`);
  });

  it('URL credentials become Basic auth and are stripped from the URL', async () => {
    const s = await serve((_req, res) => res.end('ok'));
    const r = await client.post(`http://user:p%40ss@127.0.0.1:${s.port}/x`, '{"a":1}');
    assert.equal(r.ok, true);
    const seen = s.requests[0]!;
    assert.equal(seen.headers['authorization'], `Basic ${Buffer.from('user:p@ss').toString('base64')}`);
    assert.equal(seen.url, '/x');
    assert.ok(!String(seen.headers['host']).includes('user'));
    assert.ok(!String(seen.headers['host']).includes('@'));
  });

  it('errors never contain URL credentials', async () => {
    const port = await closedPort();
    const r = await client.post(`http://sekrit-user:sekrit-pass@127.0.0.1:${port}/x`, '{}');
    assert.equal(r.ok, false);
    assert.ok(r.error);
    assert.ok(!r.error.includes('sekrit'), r.error);
    const strict = new WebhookClient({ allowPrivate: false });
    try {
      const refused = await strict.post('http://sekrit-user:sekrit-pass@10.0.0.1/x', '{}');
      assert.equal(refused.ok, false);
      assert.ok(!(refused.error ?? '').includes('sekrit'), refused.error);
    } finally {
      await strict.close();
    }
  });

  it('302 is not followed', async () => {
    const target = await serve((_req, res) => res.end('should not be reached'));
    const s = await serve((_req, res) => {
      res.writeHead(302, { location: `${target.base}/elsewhere` });
      res.end();
    });
    const r = await client.post(s.base, '{}');
    assert.equal(r.ok, false);
    assert.equal(r.status, 302);
    assert.equal(target.requests.length, 0);
  });

  it('a huge (5 MB) response body does not hang and the result is still ok', async () => {
    const big = Buffer.alloc(5 * 1024 * 1024, 0x61);
    const s = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(big.length) });
      res.end(big);
    });
    const t0 = Date.now();
    const r = await client.post(s.base, '{}');
    assert.equal(r.ok, true);
    assert.equal(r.status, 200);
    assert.ok(Date.now() - t0 < 2_500);
    // The 5 MB were not drained: the connection was destroyed, so the next
    // post has to open a fresh one.
    const again = await client.post(s.base, '{}');
    assert.equal(again.ok, true);
    assert.ok(s.connections >= 2, `connections: ${s.connections}`);
  });

  it('a huge chunked (no content-length) body is cut off too', async () => {
    const chunk = Buffer.alloc(64 * 1024, 0x62);
    const s = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      let n = 0;
      const write = (): void => {
        while (n < 80) {
          n++;
          if (!res.write(chunk)) {
            res.once('drain', write);
            return;
          }
        }
        res.end();
      };
      write();
    });
    const r = await client.post(s.base, '{}');
    assert.equal(r.ok, true);
    assert.equal(r.status, 200);
  });

  it('allowPrivate=false refuses 127.0.0.1 and localhost without connecting', async () => {
    const s = await serve((_req, res) => res.end('ok'));
    const strict = new WebhookClient({ allowPrivate: false });
    try {
      for (const url of [
        `http://127.0.0.1:${s.port}/x`,
        `http://localhost:${s.port}/x`,
        `http://[::ffff:127.0.0.1]:${s.port}/x`,
      ]) {
        const r = await strict.post(url, '{}');
        assert.equal(r.ok, false, url);
        assert.equal(r.status, null);
        assert.ok(r.error);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(s.requests.length, 0);
      assert.equal(s.connections, 0);
    } finally {
      await strict.close();
    }
  });

  it('allowPrivate=false refuses a hostname that resolves to loopback (connect-time lookup)', async () => {
    const s = await serve((_req, res) => res.end('ok'));
    let lookups = 0;
    const rebinding: LookupFunction = (_host, options, cb) => {
      lookups++;
      if (options.all) cb(null, [{ address: '127.0.0.1', family: 4 }]);
      else cb(null, '127.0.0.1', 4);
    };
    const strict = new WebhookClient({ allowPrivate: false, lookup: rebinding });
    try {
      const r = await strict.post(`http://hooks.customer.example:${s.port}/x`, '{}');
      assert.equal(r.ok, false);
      assert.equal(r.status, null);
      assert.match(r.error ?? '', /non-public/);
      assert.ok(lookups >= 1);
      assert.equal(s.requests.length, 0);
      assert.equal(s.connections, 0);
    } finally {
      await strict.close();
    }
    // Same resolver but private callbacks allowed: the request goes through.
    const lax = new WebhookClient({ allowPrivate: true, lookup: rebinding });
    try {
      const r = await lax.post(`http://hooks.customer.example:${s.port}/x`, '{}');
      assert.equal(r.ok, true);
      assert.equal(s.requests[0]?.headers['host'], `hooks.customer.example:${s.port}`);
    } finally {
      await lax.close();
    }
  });

  it('keep-alive: 20 sequential posts reuse connections', async () => {
    const s = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    });
    const c = new WebhookClient({ allowPrivate: true });
    try {
      for (let i = 0; i < 20; i++) {
        const r = await c.post(`${s.base}/k`, JSON.stringify({ i }));
        assert.equal(r.ok, true);
      }
      assert.equal(s.requests.length, 20);
      assert.ok(s.connections <= 2, `connections: ${s.connections}`);
    } finally {
      await c.close();
    }
  });

  it('after close(), post returns ok false instead of throwing', async () => {
    const c = new WebhookClient({ allowPrivate: true });
    await c.close();
    const r = await c.post('http://127.0.0.1:1/x', '{}');
    assert.equal(r.ok, false);
    assert.ok(r.error);
  });
});

// ---------------------------------------------------------------------------
// Standard Webhooks signing

describe('signWebhook', () => {
  it('generates valid secrets', () => {
    const s = generateWebhookSecret();
    assert.match(s, /^whsec_[A-Za-z0-9+/]+=*$/);
    assert.equal(Buffer.from(s.slice(6), 'base64').length, 32);
    assert.equal(isValidWebhookSecret(s), true);
    assert.notEqual(generateWebhookSecret(), s);
  });

  it('verifies with the standardwebhooks package', () => {
    const secret = generateWebhookSecret();
    const body = JSON.stringify({ type: 'message.delivered', data: { id: 'm_1', to: '+15555550100', text: 'héllo ✓' } });
    const ts = Math.floor(Date.now() / 1000);
    const headers = signWebhook(secret, 'msg_2abc', ts, body);
    assert.equal(headers['webhook-id'], 'msg_2abc');
    assert.equal(headers['webhook-timestamp'], String(ts));
    assert.match(headers['webhook-signature'], /^v1,[A-Za-z0-9+/]+=*$/);
    const payload = new Webhook(secret).verify(body, headers);
    assert.deepEqual(payload, JSON.parse(body));
  });

  it('matches the published Standard Webhooks test vector', () => {
    // From the standard-webhooks reference library tests.
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const h = signWebhook(secret, 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}');
    assert.equal(h['webhook-signature'], 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  it('tampered body, id, timestamp or wrong secret fail verification', () => {
    const secret = generateWebhookSecret();
    const body = '{"event":"x","n":1}';
    const ts = Math.floor(Date.now() / 1000);
    const headers = signWebhook(secret, 'msg_1', ts, body);
    const wh = new Webhook(secret);
    assert.throws(() => wh.verify('{"event":"x","n":2}', headers));
    assert.throws(() => wh.verify(body, { ...headers, 'webhook-id': 'msg_2' }));
    assert.throws(() => wh.verify(body, { ...headers, 'webhook-timestamp': String(ts - 1) }));
    assert.throws(() => new Webhook(generateWebhookSecret()).verify(body, headers));
    // Stale timestamps are refused by verifiers (replay window).
    const old = signWebhook(secret, 'msg_1', ts - 3600, body);
    assert.throws(() => wh.verify(body, old));
  });

  it('validates secrets', () => {
    const b = (n: number): string => Buffer.alloc(n, 7).toString('base64');
    const table: Array<[string, boolean]> = [
      [`whsec_${b(24)}`, true],
      [`whsec_${b(32)}`, true],
      [`whsec_${b(64)}`, true],
      [`whsec_${b(23)}`, false],
      [b(32), false], // missing prefix
      [`WHSEC_${b(32)}`, false],
      [`whsec_`, false],
      [`whsec_${b(32)}!`, false],
      [`whsec_${b(32).slice(0, -1)}`, false], // broken padding
      [`whsec_${b(32).replace(/=+$/, '')}`, false], // unpadded
      [`whsec_ ${b(32)}`, false],
      [`whsec_${Buffer.alloc(32, 0xfb).toString('base64url')}`, false], // url-safe alphabet
      ['', false],
    ];
    for (const [s, want] of table) assert.equal(isValidWebhookSecret(s), want, s);
  });

  it('signWebhook refuses invalid secrets', () => {
    assert.throws(() => signWebhook('whsec_short', 'msg_1', 1, '{}'));
    assert.throws(() => signWebhook('nope', 'msg_1', 1, '{}'));
  });
});
