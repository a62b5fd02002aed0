// Copies the non-TypeScript files the compiled service needs (SQL migrations) into dist/.
import { cpSync, mkdirSync } from 'node:fs';
mkdirSync('dist/shared/db/migrations', { recursive: true });
cpSync('shared/db/migrations', 'dist/shared/db/migrations', { recursive: true });
