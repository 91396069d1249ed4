import { STOP_GRACE_MS } from "@connector-store/core/adapter"
import Pg from "pg"

const ignore = (): void => undefined

/** Destroys the socket of `client` now: every statement waiting on it fails at once, and the server ends its session. */
export const destroySocket = (client: Pg.ClientBase): void => {
  const stream = (client as unknown as { readonly connection?: { readonly stream?: { destroy?: () => void } } }).connection?.stream
  // A destroyed client may still report its end: it is heard here, never thrown.
  client.on("error", ignore)
  stream?.destroy?.()
}

/** How long a cancel request may take to reach the server before its connection is dropped. */
const CANCEL_WITHIN_MS = 5_000

/**
 * Asks the server, over a connection of its own (no pool slot), to cancel
 * what `client`'s backend runs now, and calls `then` once the server has
 * taken the request (it closes that connection), within `STOP_GRACE_MS`,
 * or at once when nothing runs. On a dead network the request is
 * dropped: `then` runs after the grace all the same.
 */
const cancelOnServer = (pool: Pg.Pool, client: Pg.PoolClient, then: () => void): void => {
  let called = false
  const once = () => {
    if (called) return
    called = true
    clearTimeout(grace)
    then()
  }
  // Shorter than the store's own wait, so that a call answered after it finds its connection already gone.
  const grace = setTimeout(once, STOP_GRACE_MS * 0.8)
  const running = client as unknown as {
    readonly _getActiveQuery?: () => unknown
    readonly processID?: unknown
    readonly secretKey?: unknown
  }
  if (!running._getActiveQuery?.() || typeof running.processID !== "number") return once()
  try {
    const canceller = new Pg.Client(pool.options) as unknown as {
      readonly host: string
      readonly port: number
      readonly connection: {
        on: (event: string, listener: () => void) => void
        connect: (port: number | string, host?: string) => void
        cancel: (processID: unknown, secretKey: unknown) => void
        readonly stream?: { destroy?: () => void }
      }
    }
    const con = canceller.connection
    con.on("error", once)
    con.on("end", once)
    con.on("connect", () => con.cancel(running.processID, running.secretKey))
    if (canceller.host.startsWith("/")) con.connect(`${canceller.host}/.s.PGSQL.${canceller.port}`)
    else con.connect(canceller.port, canceller.host)
    const drop = setTimeout(() => con.stream?.destroy?.(), CANCEL_WITHIN_MS)
    drop.unref?.()
  } catch {
    // Best effort: the socket is destroyed anyway, and the session's statement_timeout ends the statement.
    once()
  }
}

/**
 * Closes the pool's idle clients now. A client given up because its call
 * ran out most likely sits on a network that lost it; its idle siblings
 * probably share that fate and would hang the next calls that take them.
 * New connections are made as calls need them.
 */
const evictIdle = (pool: Pg.Pool): void => {
  const internals = pool as unknown as {
    readonly _idle?: ReadonlyArray<{ readonly client: Pg.PoolClient }>
    readonly _remove?: (client: Pg.PoolClient) => void
  }
  if (!Array.isArray(internals._idle) || typeof internals._remove !== "function") return
  for (const { client } of Array.from(internals._idle)) {
    destroySocket(client)
    internals._remove.call(pool, client)
  }
}

/**
 * A client checked out of the pool. `release` hands it back (given an
 * error, the pool discards it). `giveUp` asks the server to cancel what it
 * runs and destroys its socket at once, then discards it once the server
 * has taken the cancel (at most `STOP_GRACE_MS` later); it answers when
 * that is done, so a caller told its call ended knows the statement will
 * not apply after. Each acts once: a `release` after `giveUp`, or anything
 * after either, is a no-op.
 */
export interface HeldClient {
  readonly client: Pg.PoolClient
  readonly release: (error?: unknown) => void
  readonly giveUp: (why: string) => Promise<void>
}

/**
 * The pool's checked-out clients. None is held longer than `limitMs` (the
 * store's call bound: a call that holds one that long has already been
 * answered `timeout`): one shared timer, running only while clients are
 * out, gives such a client up, so a statement stuck on a dead network
 * frees its slot.
 */
export interface Holds {
  /** Checks a client out of the pool, held until released or given up. */
  readonly checkout: (done: (cause: Error | undefined, held?: HeldClient) => void) => void
  /** Gives up every client still out (the pool is closing); the idle ones are the pool's to end. */
  readonly giveUpAll: (why: string) => void
  /**
   * Starts holding clients to the bound: called once the store is open, so
   * that opening (migrations under their lock) is bounded by its own limits
   * instead.
   */
  readonly enforce: () => void
}

const toError = (cause: unknown): Error => cause instanceof Error ? cause : new Error(String(cause))

/** The holds of `pool`, each given up past `limitMs`. */
export const makeHolds = (pool: Pg.Pool, limitMs: number): Holds => {
  const out = new Set<{ readonly since: number; readonly held: HeldClient }>()
  const every = Math.min(1_000, Math.max(25, Math.floor(limitMs / 8)))
  let timer: ReturnType<typeof setInterval> | undefined
  let enforcing = false
  let closing = false
  const watch = () => {
    if (timer !== undefined || !enforcing || out.size === 0) return
    timer = setInterval(sweep, every)
    timer.unref?.()
  }
  const sweep = () => {
    const now = performance.now()
    for (const entry of out) {
      if (now - entry.since >= limitMs) entry.held.giveUp(`held past the call bound (${limitMs} ms)`)
    }
    if (out.size === 0 && timer !== undefined) {
      clearInterval(timer)
      timer = undefined
    }
  }
  return {
    checkout: (done) => {
      pool.connect((cause, client, release) => {
        if (cause !== undefined && cause !== null || client === undefined) {
          done(toError(cause ?? new Error("No client returned")))
          return
        }
        let reported: unknown
        let over = false
        const onError = (error: unknown) => {
          reported = error
        }
        client.on("error", onError)
        const end = (error: unknown) => {
          if (over) return false
          over = true
          out.delete(entry)
          client.off("error", onError)
          const discard = error ?? reported
          release(discard === undefined ? undefined : toError(discard))
          return true
        }
        let stopping: Promise<void> | undefined
        const held: HeldClient = {
          client,
          release: (error) => {
            if (stopping === undefined) end(error)
          },
          giveUp: (why) => {
            if (over) return Promise.resolve()
            if (stopping === undefined && !closing) evictIdle(pool)
            stopping ??= new Promise<void>((stopped) => {
              cancelOnServer(pool, client, () => {
                end(Object.assign(new Error(`connection given up: ${why}`), { code: "ETIMEDOUT" }))
                stopped()
              })
              // Closed at once, not after the cancel: a backend that checks its client (see `CLIENT_CHECK_MS`) stops even when the cancel is lost.
              destroySocket(client)
            })
            return stopping
          }
        }
        const entry = { since: performance.now(), held }
        out.add(entry)
        watch()
        done(undefined, held)
      })
    },
    giveUpAll: (why) => {
      closing = true
      for (const entry of Array.from(out)) entry.held.giveUp(why)
    },
    enforce: () => {
      enforcing = true
      watch()
    }
  }
}
