// Copies the non-TypeScript files the compiled service needs (SQL migrations) into the build's
// output directory (`dist`, or the one given: the deploy test builds into a directory of its own).
import { cpSync, mkdirSync } from 'node:fs';
import path from 'node:path';
const out = process.argv[2] ?? 'dist';
mkdirSync(path.join(out, 'shared/db/migrations'), { recursive: true });
cpSync('shared/db/migrations', path.join(out, 'shared/db/migrations'), { recursive: true });
