/** REST API v1 (issue 6): credit, sent messages, key settings, sub-keys. */
import { Router } from 'express';
import type { AppContext } from '../context.js';

export function restRouter(_ctx: AppContext): Router {
  return Router();
}
