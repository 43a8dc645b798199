/**
 * The core's answers to a worker's identity and liveness questions: a newer
 * registration with a live worker's id replaces the older session, which is
 * told WORKER_REPLACED before it is closed; a worker that asked for
 * heartbeat acknowledgements gets HEARTBEAT_ACK for every HEARTBEAT, and
 * `heartbeatAck` is offered in WORKER_REGISTERED.features.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CoreHarness, effectsOf, messagesOf, sentTo } from '../helpers/core-harness.js';

describe('core: worker identity', () => {
  it('tells the displaced session WORKER_REPLACED, then closes it', () => {
    const h = new CoreHarness();
    const oldConn = h.register('twin', 1);
    const newConn = h.register('twin', 1);
    const effects = h.last;
    const toOld = sentTo(effects, oldConn);
    assert.equal(toOld.length, 1);
    const error = toOld[0];
    assert.equal(error?.type, 'ERROR');
    assert.equal(error?.type === 'ERROR' ? error.code : null, 'WORKER_REPLACED');
    assert.match(error?.type === 'ERROR' ? error.message : '', /twin/);
    // The ERROR goes before the close, and the new session is untouched.
    const order = effects
      .filter((e) => (e.kind === 'send' || e.kind === 'close') && e.connId === oldConn)
      .map((e) => e.kind);
    assert.deepEqual(order, ['send', 'close']);
    assert.equal(sentTo(effects, newConn)[0]?.type, 'WORKER_REGISTERED');
    assert.deepEqual(
      effectsOf(effects, 'close').map((c) => c.connId),
      [oldConn],
    );
  });

  it('sends nothing to a connection whose worker registered for the first time', () => {
    const h = new CoreHarness();
    const connId = h.register('solo', 1);
    assert.deepEqual(messagesOf(h.last, 'ERROR', connId), []);
  });
});

describe('core: heartbeat acknowledgements', () => {
  it('offers heartbeatAck in WORKER_REGISTERED.features', () => {
    const h = new CoreHarness();
    const connId = h.register('w', 1);
    const registered = messagesOf(h.last, 'WORKER_REGISTERED', connId)[0];
    assert.ok(registered?.features?.includes('heartbeatAck'));
  });

  it('answers every HEARTBEAT with HEARTBEAT_ACK when the worker asked', () => {
    const h = new CoreHarness();
    const connId = h.register('acked', 1, null, { heartbeatAck: true });
    for (let i = 0; i < 3; i++) {
      const effects = h.heartbeat('acked');
      assert.deepEqual(messagesOf(effects, 'HEARTBEAT_ACK', connId), [
        { type: 'HEARTBEAT_ACK', workerId: 'acked' },
      ]);
    }
  });

  it('sends no HEARTBEAT_ACK to a worker that did not ask', () => {
    const h = new CoreHarness();
    h.register('quiet', 1, null, { heartbeatAck: false });
    assert.deepEqual(messagesOf(h.heartbeat('quiet'), 'HEARTBEAT_ACK'), []);
    h.register('v1', 1);
    assert.deepEqual(messagesOf(h.heartbeat('v1'), 'HEARTBEAT_ACK'), []);
  });
});
