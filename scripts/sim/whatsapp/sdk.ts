/**
 * The Embedded Signup stand-in: a script served at `/_sim/sdk.js` in place of Meta's JS SDK.
 * It defines `window.FB = { init, login, getLoginStatus }`. `FB.login(callback, options)` asks the
 * simulator for a fresh single-use code (`POST /_sim/codes`), posts the
 * `WA_EMBEDDED_SIGNUP` `FINISH` message with the seeded ids to the window, then calls
 * `callback({authResponse: {code}, status: 'connected'})`. A cancelled signup (query
 * `?cancel=<current_step>` on the script URL, or `simCancel` in the options of `FB.init` or
 * `FB.login`) posts `CANCEL` with `current_step` and calls back without an `authResponse`.
 * `?waba_id=` (or `simWabaId`) picks another seeded WABA. Like the real SDK it calls
 * `window.fbAsyncInit` once loaded. The message's origin is the page's own (the real one comes
 * from a facebook.com origin), so a page that checks the origin must accept the simulator's.
 */

export function sdkScript(base: string, query: URLSearchParams): string {
  const cancel = query.get('cancel');
  const config = {
    base,
    cancel: cancel === null ? null : cancel || 'PHONE_NUMBER_VERIFICATION',
    wabaId: query.get('waba_id'),
  };
  return `/* switchboard WhatsApp simulator: Embedded Signup stand-in for Meta's JS SDK */
(function () {
  'use strict';
  var cfg = ${JSON.stringify(config)};
  var inited = {};
  function post(event, data) {
    window.postMessage(JSON.stringify({ type: 'WA_EMBEDDED_SIGNUP', event: event, data: data, version: 'v4' }), '*');
  }
  function login(callback, options) {
    options = options || {};
    var cancel = options.simCancel || inited.simCancel || cfg.cancel;
    var wabaId = options.simWabaId || inited.simWabaId || cfg.wabaId;
    if (cancel) {
      post('CANCEL', { current_step: String(cancel) });
      setTimeout(function () { callback({ authResponse: null, status: 'unknown' }); }, 0);
      return;
    }
    var url = cfg.base + '/_sim/codes' + (wabaId ? '?waba_id=' + encodeURIComponent(wabaId) : '');
    fetch(url, { method: 'POST' })
      .then(function (r) { if (!r.ok) throw new Error('simulator answered ' + r.status); return r.json(); })
      .then(function (s) {
        post('FINISH', { waba_id: s.waba_id, phone_number_id: s.phone_number_id, business_id: s.business_id });
        callback({ authResponse: { code: s.code, userID: s.business_id, expiresIn: 600 }, status: 'connected' });
      })
      .catch(function (e) {
        post('CANCEL', { current_step: 'BUSINESS_ACCOUNT_SELECTION', error_message: String(e && e.message || e) });
        callback({ authResponse: null, status: 'unknown' });
      });
  }
  window.FB = {
    init: function (options) { inited = options || {}; },
    login: login,
    getLoginStatus: function (callback) { callback({ status: 'unknown', authResponse: null }); },
    AppEvents: { logPageView: function () {} }
  };
  if (typeof window.fbAsyncInit === 'function') window.fbAsyncInit();
})();
`;
}
