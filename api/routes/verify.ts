/** Verification API (issue 7). */
import { Router } from 'express';
import type { AppContext } from '../context.js';

export function verifyRouter(_ctx: AppContext): Router {
  return Router();
}
