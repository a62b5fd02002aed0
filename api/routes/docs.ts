/**
 * The API documents: `GET /openapi` (the list), `GET /openapi/<family>.json` (OpenAPI 3.1, built
 * once per process from the Joi schemas, api/openapi/documents.ts) and `GET /docs`, which renders
 * them with Swagger UI served from node_modules (no CDN: the page loads nothing from elsewhere,
 * and its Content-Security-Policy says so).
 */
import { readFileSync, existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import express, { Router } from 'express';
import type { AppContext } from '../context.js';
import { FAMILY_NAMES, openApiDocuments, type FamilyName } from '../openapi/documents.js';

const ASSETS = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

const TITLES: Record<FamilyName, string> = {
  sending: 'Sending API v2', legacy: 'Legacy JSON v1', simple: 'Simple endpoint', xml: 'XML API', rest: 'REST API',
  verification: 'Verification API', whatsapp: 'WhatsApp partner API', admin: 'Admin API', webhooks: 'Webhooks (events)',
};

/** The package's version (package.json above this module, in a checkout or a build). */
function packageVersion(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const file = path.join(dir, 'package.json');
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'switchboard' && pkg.version) return pkg.version;
    }
    dir = path.dirname(dir);
  }
  return '0.0.0';
}

const PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>switchboard API documents</title>
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
  <link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/assets/swagger-ui-standalone-preset.js"></script>
  <script src="/docs/init.js"></script>
</body>
</html>
`;

const CSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export function docsRouter(ctx: AppContext): Router {
  const router = Router();
  let documents: ReturnType<typeof openApiDocuments> | null = null;
  const docs = () => (documents ??= openApiDocuments(ctx.config.publicUrl, packageVersion()));

  router.get('/openapi', (_req, res) => {
    res.json({ documents: FAMILY_NAMES.map((name) => ({ name, title: TITLES[name], url: `/openapi/${name}.json` })) });
  });
  router.get('/openapi/:file', (req, res) => {
    const name = String(req.params.file).replace(/\.json$/, '') as FamilyName;
    if (!String(req.params.file).endsWith('.json') || !FAMILY_NAMES.includes(name)) {
      res.status(404).json({ message: `No such document; documents: ${FAMILY_NAMES.map((n) => `/openapi/${n}.json`).join(', ')}` });
      return;
    }
    res.json(docs()[name]);
  });

  const init = `window.ui = SwaggerUIBundle({
  urls: ${JSON.stringify(FAMILY_NAMES.map((name) => ({ url: `/openapi/${name}.json`, name: TITLES[name] })))},
  dom_id: '#swagger-ui',
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
  layout: 'StandaloneLayout',
  validatorUrl: null
});
`;
  router.get(['/docs', '/docs/'], (_req, res) => {
    res.set({ 'content-security-policy': CSP, 'x-content-type-options': 'nosniff' }).type('html').send(PAGE);
  });
  router.get('/docs/init.js', (_req, res) => {
    res.set('x-content-type-options', 'nosniff').type('application/javascript').send(init);
  });
  router.use('/docs/assets', express.static(ASSETS, { index: false, maxAge: '1h' }));
  return router;
}
