/**
 * The hosted onboarding page (D7) and its error pages, rendered on the server: plain HTML, one
 * small inline script (with the response's CSP nonce) and Meta's JS SDK (or the simulator's
 * stand-in). Everything taken from the signup is HTML-escaped; the script's data travels as a JSON
 * data block, never as script text.
 *
 * The script: `FB.init` once the SDK is loaded; on the button, `FB.login` with the signup's prefill;
 * the `WA_EMBEDDED_SIGNUP` message is believed only from the allowed origins; when both the code
 * (login callback) and the FINISH message are in, it POSTs them with the token to
 * `/whatsapp/onboarding/complete` and goes to the partner's finish URL, or shows the error; a
 * CANCEL is reported the same way and the client may start again.
 */
import type { PagePolicy } from '../../shared/whatsapp/onboarding/page.js';

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** JSON for a `<script type="application/json">` block: nothing in it can close the element. */
function jsonBlock(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

const STYLE = `
  body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; background: #f4f5f7; color: #1c1e21; }
  main { max-width: 34rem; margin: 4rem auto; background: #fff; border-radius: 12px; padding: 2rem 2.25rem; box-shadow: 0 1px 4px rgba(0,0,0,.08); }
  h1 { font-size: 1.4rem; margin: 0 0 1rem; }
  p { line-height: 1.5; }
  .logo { max-height: 48px; max-width: 200px; margin-bottom: 1rem; }
  button { font: inherit; font-weight: 600; color: #fff; background: #1877f2; border: 0; border-radius: 6px; padding: .7rem 1.4rem; cursor: pointer; }
  button:disabled { background: #9cb4d8; cursor: default; }
  #status { min-height: 1.5em; margin-top: 1.25rem; }
  #status.error, .error { color: #b3261e; }
  a { color: #1877f2; }
`;

/** The document up to `<body>`; `title` is HTML already. */
function head(title: string, nonce: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<link rel="icon" href="data:,">
<title>${title}</title>
<style nonce="${nonce}">${STYLE}</style>
</head>`;
}

export interface OnboardingPageModel {
  token: string;
  partnerName: string;
  partnerLogo: string | null;
  partnerFinishUrl: string;
  appId: string;
  graphVersion: string;
  loginOptions: Record<string, unknown>;
  completeUrl: string;
  policy: PagePolicy;
}

export function renderOnboardingPage(m: OnboardingPageModel, nonce: string): string {
  const config = {
    token: m.token, appId: m.appId, graphVersion: m.graphVersion, loginOptions: m.loginOptions, completeUrl: m.completeUrl,
    partnerName: m.partnerName, facebookOrigins: m.policy.facebookOrigins, origins: m.policy.origins, ownWindow: m.policy.ownWindow,
  };
  const partner = escapeHtml(m.partnerName);
  return `${head(`Connect WhatsApp for ${partner}`, nonce)}
<body>
<main>
${m.partnerLogo ? `<img class="logo" src="${escapeHtml(m.partnerLogo)}" alt="${partner}">\n` : ''}<h1>Connect your WhatsApp Business account</h1>
<p>${partner} uses this page to connect your WhatsApp Business account. Meta's sign-up window opens when you press the button: choose or create your business, your WhatsApp Business account and the phone number to use.</p>
<noscript><p class="error">This step needs JavaScript: Meta's sign-up runs in your browser. Please enable JavaScript and reload the page.</p></noscript>
<button id="start" type="button" disabled>Connect WhatsApp</button>
<p id="status" role="status" aria-live="polite">Loading Meta's sign-up…</p>
<p><a id="back" href="${escapeHtml(m.partnerFinishUrl)}" hidden>Back to ${partner}</a></p>
</main>
<script type="application/json" id="onboarding-config">${jsonBlock(config)}</script>
<script nonce="${nonce}">${PAGE_SCRIPT}</script>
<script nonce="${nonce}" async defer crossorigin="anonymous" src="${escapeHtml(m.policy.sdkUrl)}"></script>
</body>
</html>
`;
}

/** The page's own script (ES5, no framework). */
const PAGE_SCRIPT = `
(function () {
  'use strict';
  var cfg = JSON.parse(document.getElementById('onboarding-config').textContent);
  var button = document.getElementById('start');
  var statusEl = document.getElementById('status');
  var back = document.getElementById('back');
  var run = null;
  var FACEBOOK = /^https:\\/\\/(?:[a-z0-9-]+\\.)*facebook\\.com$/;

  function show(text, isError) {
    statusEl.textContent = text;
    statusEl.className = isError ? 'error' : '';
  }
  function ready(text) {
    button.disabled = false;
    if (text) show(text, false);
  }
  function trusted(event) {
    if (cfg.facebookOrigins && FACEBOOK.test(event.origin)) return true;
    if (cfg.origins.indexOf(event.origin) !== -1) return true;
    return cfg.ownWindow && event.source === window && event.origin === window.location.origin;
  }
  function post(body) {
    body.token = cfg.token;
    return fetch(cfg.completeUrl, {
      method: 'POST', credentials: 'omit', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body)
    }).then(function (r) {
      return r.json().then(function (b) { return b; }, function () { return { success: false, message: 'The service answered HTTP ' + r.status + '.' }; });
    }, function () {
      return { success: false, message: 'The service could not be reached. Check your connection and try again.' };
    });
  }
  function submit() {
    if (!run || run.sent || !run.code || !run.finish) return;
    run.sent = true;
    clearTimeout(run.timer);
    show('Finishing the setup of your WhatsApp account…', false);
    var d = run.finish.data || {};
    post({ event: run.finish.event, code: run.code, waba_id: d.waba_id, phone_number_id: d.phone_number_id, business_id: d.business_id })
      .then(function (b) {
        if (b && b.success && b.redirect_url) {
          show('Done. Taking you back to ' + cfg.partnerName + '…', false);
          window.location.assign(b.redirect_url);
          return;
        }
        show((b && b.message) || 'The setup failed.', true);
        back.hidden = false;
        ready();
      });
  }
  function cancelled(data) {
    if (!run || run.sent) return;
    run.sent = true;
    clearTimeout(run.timer);
    var body = { event: 'CANCEL', current_step: data.current_step };
    if (data.error_message) body.error_message = String(data.error_message);
    if (data.error_id) body.error_id = String(data.error_id);
    if (data.session_id) body.session_id = String(data.session_id);
    post(body).then(function (b) {
      if (b && b.success === false && b.message) show(b.message, true);
      else show('The WhatsApp sign-up was not finished' + (data.current_step ? ' (left at ' + data.current_step + ')' : '') + '. You can start again.', false);
      back.hidden = false;
      ready();
    });
  }
  window.addEventListener('message', function (event) {
    if (!trusted(event)) return;
    var data;
    try { data = typeof event.data === 'string' ? JSON.parse(event.data) : event.data; } catch (e) { return; }
    if (!data || data.type !== 'WA_EMBEDDED_SIGNUP' || !run) return;
    if (data.event === 'CANCEL') cancelled(data.data || {});
    else if (/^FINISH/.test(String(data.event))) { run.finish = { event: String(data.event), data: data.data }; submit(); }
  });
  window.fbAsyncInit = function () {
    FB.init({ appId: cfg.appId, autoLogAppEvents: true, xfbml: false, version: cfg.graphVersion });
    ready('Press the button to start.');
  };
  button.addEventListener('click', function () {
    button.disabled = true;
    show('Meta\\'s sign-up window is open…', false);
    run = { code: null, finish: null, sent: false, timer: null };
    var mine = run;
    FB.login(function (response) {
      if (mine !== run) return;
      if (response && response.authResponse && response.authResponse.code) {
        run.code = response.authResponse.code;
        // The FINISH message normally comes with the code; without it the backend is told, and says what went wrong.
        run.timer = setTimeout(function () { if (!run.finish) { run.finish = { event: 'FINISH', data: {} }; submit(); } }, 15000);
        submit();
      } else {
        setTimeout(function () {
          if (mine === run && !run.sent) { run.sent = true; show('The WhatsApp sign-up window was closed before it finished. You can start again.', false); ready(); }
        }, 1000);
      }
    }, cfg.loginOptions);
  });
})();
`;

export interface ErrorPageModel {
  title: string;
  message: string;
  link?: { href: string; text: string };
}

export function renderErrorPage(m: ErrorPageModel, nonce: string): string {
  return `${head(escapeHtml(m.title), nonce)}
<body>
<main>
<h1>${escapeHtml(m.title)}</h1>
<p>${escapeHtml(m.message)}</p>
${m.link ? `<p><a href="${escapeHtml(m.link.href)}">${escapeHtml(m.link.text)}</a></p>\n` : ''}</main>
</body>
</html>
`;
}
