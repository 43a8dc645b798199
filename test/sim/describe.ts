/**
 * One-line descriptions of core inputs and effects, for `--verbose` replays.
 * Ids are shortened to their last 6 characters (they are counters anyway).
 */
import type { CoreInput, Effect } from '../../src/coordinator/core/types.js';
import type { OutboxBody } from '../../src/store/store.js';
import type { HandledKind } from './world.js';

function short(id: string): string {
  return id.length > 8 ? `~${id.slice(-6)}` : id;
}

export function describeInput(input: HandledKind): string {
  switch (input.kind) {
    case 'workerMessage': {
      const msg = input.msg;
      const detail =
        msg.type === 'TASK_RESULT'
          ? ` ${short(msg.jobId)}/${short(msg.attemptId)} ${msg.success ? 'ok' : msg.rateLimited != null ? `rate limited (${msg.rateLimited.scope}, ${msg.rateLimited.retryAfterMillis} ms)` : 'fail'}`
          : msg.type === 'WORKER_REGISTER'
            ? ` ${msg.workerId} cap ${msg.capacity}`
            : ` ${msg.workerId}`;
      return `c${input.connId} ${msg.type}${detail}`;
    }
    case 'workerViolation':
      return `c${input.connId} violation (${input.reason})`;
    case 'workerEnding':
      return `c${input.connId} end read`;
    case 'workerClosed':
      return `c${input.connId} closed (${input.reason})`;
    case 'clientRequest':
      return `c${input.connId}#${input.requestId} ${describeRequest(input)}`;
    case 'clientClosed':
      return `c${input.connId} client closed`;
    case 'waitExpired':
      return `c${input.connId}#${input.requestId} wait expired`;
    case 'releaseWaits':
      return `c${input.connId} waits released`;
    case 'subscriberStalled':
      return `c${input.connId} subscriber ${input.stalled ? 'stalled' : 'reads again'}`;
    case 'tick':
      return 'tick';
    case 'wake':
      return 'wake';
    case 'recovery':
      return 'recovery';
    case 'readDone':
      return `read ${input.readId} done (${input.result.op})`;
    case 'readFailed':
      return `read ${input.readId} failed (${input.message})`;
    case 'committed':
      return `batch ${input.batchId} committed`;
    case 'outboxMessages':
      return `outbox ${input.messages.map((m) => `${m.id}:${describeBody(m.body)}`).join(', ')} (committed through ${input.committedThrough})`;
  }
}

function describeBody(body: OutboxBody): string {
  switch (body.type) {
    case 'createJobs':
      return `createJobs ${body.jobs.map((job) => short(job.jobId)).join(',')}`;
    case 'watch':
      return `watch ${short(body.parentId)} for ${short(body.childId)}`;
    case 'parentEnded':
      return `parentEnded ${short(body.parentId)} ${body.state ?? 'unknown'} to ${body.childIds.map(short).join(',')}`;
  }
}

function describeRequest(input: Extract<CoreInput, { kind: 'clientRequest' }>): string {
  const msg = input.msg;
  switch (msg.type) {
    case 'SUBMIT_JOB':
      return `SUBMIT_JOB ${msg.taskType} ${JSON.stringify(msg.payload)} key=${msg.idempotencyKey} max=${msg.maxAttempts} ${msg.priority ?? ''}${msg.queue == null ? '' : ` queue=${msg.queue}`}${msg.runAtMillis == null ? '' : ` runAt=${msg.runAtMillis}`}${msg.dedupKey == null ? '' : ` dedup=${msg.dedupKey}/${msg.dedupMode ?? 'active'}${msg.dedupWindowMillis == null ? '' : `/${msg.dedupWindowMillis}`}`}${msg.expiresAtMillis == null ? '' : ` expires=${msg.expiresAtMillis}`}${msg.dependsOn == null ? '' : ` after=${msg.dependsOn.map(short).join(',')}/${msg.onParentFailure ?? 'cancel'}`}`;
    case 'SUBMIT_JOBS':
      return `SUBMIT_JOBS ${msg.jobs.length} jobs ${JSON.stringify(msg.jobs)}`;
    case 'GET_JOB_STATUS':
    case 'CANCEL_JOB':
      return `${msg.type} ${short(msg.jobId)}`;
    case 'WAIT_JOB':
      return `WAIT_JOB ${short(msg.jobId)} ${msg.timeoutMillis} ms`;
    case 'LIST_JOBS':
      return `LIST_JOBS limit=${msg.limit} state=${msg.state} cursor=${msg.cursor}`;
    case 'LIST_WORKERS':
      return 'LIST_WORKERS';
    case 'AUTH':
      return 'AUTH';
    case 'PURGE_JOBS':
      return `PURGE_JOBS ${msg.state} older=${msg.olderThanMillis} ms`;
    case 'RERUN_JOBS':
      return `RERUN_JOBS ${msg.queue} ${msg.state} type=${msg.taskType} since=${msg.finishedSinceMillis} limit=${msg.limit}`;
    case 'LIST_QUEUES':
      return 'LIST_QUEUES';
    case 'SIGNAL_JOB':
      return `SIGNAL_JOB ${short(msg.jobId)} ${msg.name}`;
    case 'PUBLISH_EVENT':
      return `PUBLISH_EVENT ${msg.name} key=${msg.key ?? null} id=${msg.eventId ?? null}`;
    case 'SET_TRIGGER':
      return `SET_TRIGGER ${JSON.stringify(msg.trigger)}`;
    case 'LIST_TRIGGERS':
      return 'LIST_TRIGGERS';
    case 'LIST_SHARDS':
      return 'LIST_SHARDS';
    case 'DELETE_TRIGGER':
      return `DELETE_TRIGGER ${msg.name}`;
    case 'SET_QUEUE':
      return `SET_QUEUE ${JSON.stringify(msg)}`;
    case 'SUBMIT_FLOW':
      return `SUBMIT_FLOW ${msg.jobs.length} jobs`;
    case 'SUBSCRIBE_JOBS':
      return `SUBSCRIBE_JOBS ${JSON.stringify(msg.filter)}`;
    case 'SET_SCHEDULE':
      return `SET_SCHEDULE ${msg.schedule.name}`;
    case 'LIST_SCHEDULES':
      return 'LIST_SCHEDULES';
    case 'GET_SCHEDULE':
    case 'PAUSE_SCHEDULE':
    case 'RESUME_SCHEDULE':
    case 'DELETE_SCHEDULE':
    case 'TRIGGER_SCHEDULE':
      return `${msg.type} ${msg.name}`;
  }
}

export function describeEffect(effect: Effect): string {
  switch (effect.kind) {
    case 'send': {
      const msg = effect.msg;
      const detail =
        msg.type === 'TASK_ASSIGN' || msg.type === 'TASK_CANCEL'
          ? ` ${short(msg.jobId)}/${short(msg.attemptId)}`
          : '';
      return `-> c${effect.connId} ${msg.type}${detail}`;
    }
    case 'close':
      return `close c${effect.connId} (${effect.reason})`;
    case 'reply': {
      const msg = effect.msg;
      const detail =
        msg.type === 'JOB_SUBMITTED'
          ? ` ${short(msg.jobId)}${msg.deduplicated === true ? ' deduplicated' : ''}${msg.replaced === true ? ' replaced' : ''}`
          : msg.type === 'JOB_STATUS' || msg.type === 'JOB_CANCEL'
            ? ` ${short(msg.job.jobId)} ${msg.job.state}`
            : msg.type === 'ERROR'
              ? ` ${msg.code}`
              : '';
      return `=> c${effect.connId}#${effect.requestId} ${msg.type}${detail}`;
    }
    case 'push':
      return `push c${effect.connIds.join(',c')} ${effect.msg.event} ${short(effect.msg.job.jobId)} ${effect.msg.job.state}`;
    case 'armWait':
      return `arm wait c${effect.connId}#${effect.requestId} ${effect.timeoutMs} ms`;
    case 'read':
      return `read ${effect.readId}: ${JSON.stringify(effect.read)}`;
    case 'wakeAt':
      return `wake at ${effect.atMs}`;
    case 'event': {
      const e = effect.event;
      const job = 'jobId' in e ? ` ${short(e.jobId)}` : '';
      return `event ${e.type}${job}`;
    }
  }
}
