/**
 * Leadership in the metrics: which role this coordinator has and the epoch
 * of the lease it knows of, read when scraped.
 */
import { Gauge, type Registry } from 'prom-client';
import type { RoleStatus } from '../leadership/role.js';

const ROLES: readonly RoleStatus['role'][] = ['leader', 'standby'];

export function registerLeadershipGauges(
  registry: Registry,
  source: { status(): RoleStatus },
): void {
  const registers = [registry];
  new Gauge({
    name: 'dtp_leader',
    help: '1 while this coordinator leads (serves), 0 while it stands by',
    registers,
    collect() {
      this.set(source.status().role === 'leader' ? 1 : 0);
    },
  });
  new Gauge({
    name: 'dtp_role',
    help: "This coordinator's role: 1 on the label of the current one",
    labelNames: ['role'],
    registers,
    collect() {
      const { role } = source.status();
      for (const r of ROLES) this.set({ role: r }, r === role ? 1 : 0);
    },
  });
  new Gauge({
    name: 'dtp_leader_epoch',
    help: 'Epoch (fencing token) of the leader this coordinator knows of; 0 without leadership or while unknown',
    registers,
    collect() {
      this.set(source.status().epoch ?? 0);
    },
  });
}
