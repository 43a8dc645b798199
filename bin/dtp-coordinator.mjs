#!/usr/bin/env node
// Installed command `dtp-coordinator`: runs a coordinator (scripts/coordinator.sh in a checkout).
import '../dist/src/cli/coordinator-main.js';
