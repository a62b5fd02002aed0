/**
 * `/docs` renders in a real browser: Debian's Chromium, headless, driven by playwright-core, loads
 * the page from the running service, shows the documents (operations of the first, the webhooks of
 * another), fetches nothing from any other origin and breaks no Content-Security-Policy rule; the
 * screenshot is kept beside the test's temporary files and its path printed. Without Chromium the
 * test fails and says how to install it (.ci/run installs it).
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { chromium, type BrowserContext } from 'playwright-core';
import { startTestService, type TestService } from '../support/harness.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

let svc: TestService;
let context: BrowserContext | null = null;
let profile: string;

before(async () => {
  svc = await startTestService({ pools: [] });
  profile = mkdtempSync(path.join(tmpdir(), 'sb-docs-chromium-'));
});

after(async () => {
  await context?.close();
  await svc?.stop();
  rmSync(profile, { recursive: true, force: true });
});

test('/docs renders the API documents from local assets only', { timeout: 120_000 }, async () => {
  assert.ok(existsSync(CHROMIUM), `Chromium is missing at ${CHROMIUM}: install it with \`apt-get install -y chromium\` (.ci/run does), or set CHROMIUM_PATH`);
  context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1280, height: 1600 } });
  const page = context.pages()[0] ?? await context.newPage();
  const origin = new URL(svc.url).origin;
  const elsewhere: string[] = [];
  const problems: string[] = [];
  page.on('request', (req) => {
    const url = req.url();
    if (!url.startsWith(origin) && !url.startsWith('data:')) elsewhere.push(url);
  });
  page.on('console', (msg) => {
    if (msg.type() === 'error') problems.push(msg.text());
  });
  page.on('pageerror', (err) => problems.push(err.message));

  const answer = await page.goto(`${svc.url}/docs`, { waitUntil: 'load' });
  assert.equal(answer?.status(), 200);
  assert.match(answer?.headers()['content-security-policy'] ?? '', /script-src 'self'/);
  await page.locator('.swagger-ui .info .title').filter({ hasText: 'switchboard sending API v2' }).waitFor({ timeout: 30_000 });
  await page.locator('.opblock-summary-path').first().waitFor({ timeout: 30_000 });
  const paths = await page.locator('.opblock-summary-path').allTextContents();
  assert.ok(paths.some((p) => p.includes('/v2/messages')), `operations shown: ${paths.join(', ')}`);
  const screenshot = path.join(tmpdir(), `switchboard-docs-${process.pid}.png`);
  await page.screenshot({ path: screenshot, fullPage: false });
  assert.ok(statSync(screenshot).size > 20_000, 'a screenshot with something on it');
  console.log(`# /docs screenshot: ${screenshot}`);

  // Another document through the page's own selector: the webhooks (OpenAPI 3.1 `webhooks:`).
  await page.locator('.topbar select').selectOption({ label: 'Webhooks (events)' });
  await page.locator('.swagger-ui .info .title').filter({ hasText: 'switchboard webhooks' }).waitFor({ timeout: 30_000 });
  await page.getByText('sentMessage').first().waitFor({ timeout: 30_000 });

  assert.deepEqual(elsewhere, [], 'nothing is fetched from another origin (no CDN)');
  assert.deepEqual(problems.filter((p) => !/favicon/.test(p)), [], 'no script errors or CSP violations');
});
