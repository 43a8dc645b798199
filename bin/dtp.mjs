#!/usr/bin/env node
// Installed command `dtp`: runs the client CLI (scripts/client.sh in a checkout).
// Usage and errors name it `dtp`; the variable is read once and removed.
process.env.DTP_PROGRAM_NAME = 'dtp';
await import('../dist/src/cli/client-main.js');
