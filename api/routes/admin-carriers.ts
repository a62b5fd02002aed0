/**
 * Admin calls for SMPP carrier connections and their destination-prefix routes (D11 style):
 *
 *   POST   /admin/api/carriers        {name, url, routes: [prefix…], enabled?}  201 created / 200 replaced
 *   GET    /admin/api/carriers        {carriers: [{name, kind, url (password masked), enabled, routes, source}]}
 *   DELETE /admin/api/carriers/:name  {deleted: name}, 404 when there is none
 *
 * URLs are checked with parseSmppUrl (errors never quote the password) and stored as given; the
 * password is never returned. `default` is the SMPP_URL connection and cannot be stored here.
 * Worker processes pick changes up within a few seconds (at once in this process).
 */
import Joi from 'joi';
import type { AdminExtension } from './admin.js';
import { readJsonBody } from '../middleware/body.js';
import { validate } from '../../shared/validation.js';
import { AppError, badRequest, conflict, notFound } from '../../shared/errors.js';
import { parseSmppUrl, SmppUrlError } from '../../shared/carriers/smpp/session.js';
import {
  CONNECTION_NAME_RE,
  ConnectionConflictError,
  ENV_CONNECTION,
  deleteSmppConnection,
  listSmppConnections,
  maskSmppUrl,
  saveSmppConnection,
  smppConfigChanges,
  type SmppConnectionRow,
} from '../../shared/carriers/smpp/connections.js';

interface CarrierInput {
  name: string;
  url: string;
  routes: string[];
  enabled: boolean;
}

const carrierSchema = Joi.object<CarrierInput>({
  name: Joi.string()
    .pattern(CONNECTION_NAME_RE)
    .invalid(ENV_CONNECTION)
    .required()
    .messages({
      'string.pattern.base': 'must be 1-40 letters, digits, "_" or "-"',
      'any.invalid': `"${ENV_CONNECTION}" is the SMPP_URL connection and cannot be stored`,
    }),
  url: Joi.string().min(1).max(2048).required(),
  routes: Joi.array()
    .items(Joi.string().allow('').pattern(/^[0-9]{0,15}$/).messages({ 'string.pattern.base': 'must be up to 15 digits' }))
    .unique()
    .max(1000)
    .default([]),
  enabled: Joi.boolean().default(true),
});

function present(row: Pick<SmppConnectionRow, 'name' | 'url' | 'enabled' | 'routes'>, source: 'admin' | 'env'): Record<string, unknown> {
  return { name: row.name, kind: 'smpp', url: maskSmppUrl(row.url), enabled: row.enabled, routes: row.routes, source };
}

export const carrierAdmin: AdminExtension = (router, ctx) => {
  router.post('/carriers', async (req, res) => {
    const input = validate(carrierSchema, await readJsonBody(req), { convert: true });
    let bindMode: string;
    try {
      bindMode = parseSmppUrl(input.url).bindMode;
    } catch (err) {
      if (err instanceof SmppUrlError) throw badRequest(`url: ${err.message}`, 'VALIDATION', { field: 'url' });
      throw err;
    }
    if (bindMode === 'receiver' && input.routes.length > 0) {
      throw badRequest('routes: a receiver bind cannot send; store it without routes', 'VALIDATION', { field: 'routes' });
    }
    let saved: Awaited<ReturnType<typeof saveSmppConnection>>;
    try {
      saved = await saveSmppConnection(ctx.db, input);
    } catch (err) {
      if (err instanceof ConnectionConflictError) throw conflict(err.message);
      throw err;
    }
    smppConfigChanges.emit('changed');
    res.status(saved.created ? 201 : 200).json(present(saved.connection, 'admin'));
  });

  router.get('/carriers', async (_req, res) => {
    const rows = await listSmppConnections(ctx.db);
    const carriers = rows.map((row) => present(row, 'admin'));
    if (ctx.config.smppUrl) {
      carriers.unshift(present({ name: ENV_CONNECTION, url: ctx.config.smppUrl, enabled: true, routes: [''] }, 'env'));
    }
    res.json({ carriers });
  });

  router.delete('/carriers/:name', async (req, res) => {
    const name = String(req.params.name);
    if (name === ENV_CONNECTION && ctx.config.smppUrl) {
      throw new AppError(400, 'BAD_REQUEST', `"${ENV_CONNECTION}" comes from SMPP_URL; unset it to remove the connection`);
    }
    if (!(await deleteSmppConnection(ctx.db, name))) throw notFound(`carrier connection "${name}" not found`);
    smppConfigChanges.emit('changed');
    res.json({ deleted: name });
  });
};
