#!/usr/bin/env node
// Installed command `dtp-coordinator`: runs a coordinator (scripts/coordinator.sh in a checkout).
// Usage and errors name it `dtp-coordinator`; the variable is read once and removed.
process.env.DTP_PROGRAM_NAME = 'dtp-coordinator';
await import('../dist/src/cli/coordinator-main.js');
