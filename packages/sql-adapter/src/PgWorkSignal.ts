import { WorkNotices, type WorkSignalApi } from "@connector-store/core/adapter"
import { Effect } from "effect"
import Pg from "pg"
import { destroySocket } from "./internal/pgHolds.js"
import type { TableNames } from "./Tables.js"

/** The channel a store's tables notify on: one per table prefix. */
export const workChannelOf = (t: TableNames): string => `${t.operation}_work`

/**
 * The statements that make every commit which leaves work runnable within
 * a second notify `workChannelOf(t)` (Postgres only): an operation that is
 * attempted and due (a retry, a resume, a lapsed run's schedule), a watch
 * that is unsettled, unclaimed and due (an arm, a coalesce). Row triggers
 * with those conditions, so the lifecycle's own writes (a claim schedules
 * the lease's expiry, a finalize settles) send nothing: a notification
 * takes a database-wide lock at commit. Postgres folds the notifications of
 * one transaction into one, delivered only if it commits.
 */
export const workTriggerStatements = (t: TableNames): ReadonlyArray<string> => {
  const notify = `${t.operation}_notify_work`
  const dueSoon = `NEW.next_attempt_at IS NOT NULL AND NEW.next_attempt_at <= (extract(epoch FROM clock_timestamp()) * 1000)::bigint + 1000`
  return [
    `CREATE OR REPLACE FUNCTION ${notify}() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM pg_notify('${workChannelOf(t)}', '');
        RETURN NULL;
      END $$`,
    `DROP TRIGGER IF EXISTS ${t.operation}_work ON ${t.operation}`,
    `CREATE TRIGGER ${t.operation}_work AFTER INSERT OR UPDATE ON ${t.operation}
      FOR EACH ROW WHEN (NEW.state = 'attempted' AND ${dueSoon})
      EXECUTE FUNCTION ${notify}()`,
    `DROP TRIGGER IF EXISTS ${t.projectionWatch}_work ON ${t.projectionWatch}`,
    `CREATE TRIGGER ${t.projectionWatch}_work AFTER INSERT OR UPDATE ON ${t.projectionWatch}
      FOR EACH ROW WHEN (NEW.verification_status IN ('pending_verification', 'repair_failed') AND NEW.claimed_until IS NULL AND ${dueSoon})
      EXECUTE FUNCTION ${notify}()`
  ]
}

/** What the listener connects with. */
export interface PgListenerOptions {
  readonly url: string
  readonly applicationName: string
  readonly connectTimeoutMs: number
}

/** How long after a failed connect the listener tries again, at the earliest. */
const RETRY_AFTER_MS = 1_000

/**
 * How often the listening connection is asked for a round trip: one that
 * has not answered the previous ask by the next is dropped. A connection
 * the network lost without closing it (a NAT entry timed out) would
 * otherwise look like one that hears no notifications, for as long as the
 * kernel's keepalive takes to give up on it (over two hours, by Linux's
 * defaults).
 */
const LISTENER_CHECK_MS = 2_000

/**
 * A store's notices of work on Postgres: one connection of its own (not
 * the pool's) `LISTEN`ing on the tables' channel, opened by the first wait
 * and kept while the store is open. A notification is a notice; so is the
 * listener (re)starting, since commits made while it was not listening
 * went unheard. A dropped connection is a notice too, and so is one that
 * stops answering (see `LISTENER_CHECK_MS`); the next wait connects again
 * (at most once a second): while it cannot, waits run to their timeout,
 * and the sweep finds the work.
 */
export const makePgWorkSignal = (options: PgListenerOptions, channel: string) => {
  const notices = new WorkNotices()
  let listening: Pg.Client | undefined
  let connecting = false
  let failedAt = -Infinity
  let closed = false
  /** The listening connection while its round trip is unanswered. */
  let asked: Pg.Client | undefined
  let checks: ReturnType<typeof setInterval> | undefined

  const check = () => {
    const client = listening
    if (client === undefined) return
    if (asked === client) return drop(client)
    asked = client
    client.query("SELECT 1").then(() => {
      if (asked === client) asked = undefined
    }, () => drop(client))
  }

  const drop = (client: Pg.Client) => {
    if (listening === client) {
      listening = undefined
      notices.notify()
    }
    client.removeAllListeners("notification")
    destroySocket(client)
  }

  /** Starts listening unless it is, or tried within the last second; the Promise ends with the attempt. */
  let attempt: Promise<void> = Promise.resolve()
  const listen = (): Promise<void> => {
    if (closed || listening !== undefined || connecting || performance.now() - failedAt < RETRY_AFTER_MS) return attempt
    connecting = true
    const client = new Pg.Client({
      connectionString: options.url,
      application_name: `${options.applicationName} (listener)`,
      connectionTimeoutMillis: options.connectTimeoutMs,
      keepAlive: true
    })
    client.on("error", () => drop(client))
    client.on("end", () => drop(client))
    client.on("notification", () => notices.notify())
    attempt = client.connect()
      .then(() => client.query(`LISTEN ${client.escapeIdentifier(channel)}`))
      .then(() => {
        connecting = false
        if (closed) return drop(client)
        listening = client
        if (checks === undefined) {
          checks = setInterval(check, LISTENER_CHECK_MS)
          checks.unref?.()
        }
        notices.notify()
      }, () => {
        connecting = false
        failedAt = performance.now()
        drop(client)
      })
    return attempt
  }

  const signal: WorkSignalApi = {
    // A wait begins once the listener listens (or could not): its notice then counts, not a later one.
    wait: (since, timeoutMs, method) =>
      Effect.suspend(() => {
        const listened = listen()
        return listening !== undefined || !connecting
          ? notices.wait(since, timeoutMs, method)
          : Effect.zipRight(Effect.promise(() => listened), notices.wait(since, timeoutMs, method))
      })
  }

  /** Ends every wait (`StoreClosed`) and the listening connection. */
  const close = Effect.sync(() => {
    closed = true
    clearInterval(checks)
    notices.close()
    const client = listening
    listening = undefined
    if (client !== undefined) {
      client.removeAllListeners("notification")
      client.end().catch(() => undefined)
      setTimeout(() => destroySocket(client), 200).unref?.()
    }
  })

  return { signal, close }
}
