import { createHash } from "node:crypto"
import { type DirectRowsOf, type DirectTransactionOf, laneCallNow, type LaneDatabaseApi } from "@connector-store/core/adapter"
import type * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { Statement } from "@effect/sql/Statement"
import { Effect } from "effect"
import type Pg from "pg"
import type { RawRow } from "./internal/columns.js"
import { directRows } from "./internal/directRows.js"
import { type Compiled, compiled, directFailure } from "./internal/directStatements.js"
import { withConnectionThen } from "./internal/transactionContext.js"
import type { HeldClient, Holds } from "./internal/pgHolds.js"
import type { TableNames } from "./Tables.js"

/** Runs one statement: the pool (a client per statement) or a transaction's client. */
type Run = (text: string, params: ReadonlyArray<unknown>) => Promise<Pg.QueryResult>

/** What the lane needs of the store's Postgres client (see `PgConnection.laneParts`). */
export interface PgLaneParts {
  readonly pool: Pg.Pool
  /** Where its clients are checked out: none is held past the call bound (see `Holds`). */
  readonly holds: Holds
  /** The `@effect/sql` connection of a checked-out client, for effects joined to its transaction. */
  readonly connectionOf: (client: Pg.PoolClient) => Connection
  /** Whether the lane's statements are sent as named prepared statements (see `preparedQuery`). */
  readonly prepare: boolean
}

/** How many statement texts get a name; past this many, texts are sent unnamed. */
export const NAMED_STATEMENTS_KEPT = 1024

/**
 * `pg` query configs for statement texts: with `prepare`, each text under a
 * name of its own (a hash of the text), which `pg` parses once per
 * connection and then only binds and executes; a connection that is
 * replaced parses it again. Without, unnamed (parsed every time).
 */
export const preparedQuery = (prepare: boolean) => {
  const names = new Map<string, string>()
  const nameOf = (text: string): string | undefined => {
    const kept = names.get(text)
    if (kept !== undefined || names.size >= NAMED_STATEMENTS_KEPT) return kept
    const name = `cs_${createHash("sha256").update(text).digest("hex").slice(0, 24)}`
    names.set(text, name)
    return name
  }
  return (text: string, values: ReadonlyArray<unknown>): Pg.QueryConfig => {
    const name = prepare ? nameOf(text) : undefined
    return name === undefined ? { text, values: values as Array<unknown> } : { name, text, values: values as Array<unknown> }
  }
}

/**
 * The project's Postgres client as a `LaneDatabaseApi`: the repositories'
 * own statements (`watchStatements`, `operationStatements`), compiled and
 * sent straight to `pg`, one Promise each. A statement outside a
 * transaction takes a pooled client for itself; a transaction checks one
 * out, `BEGIN`s on it, runs its rows there, and hands it back after
 * `COMMIT` or `ROLLBACK`, or discards it when one of those failed (it
 * could still hold an open transaction). Every client is checked out of
 * `holds`, so one stuck on a dead network past the call bound is given up
 * and its slot freed (its statement then fails). Failures are classified
 * `PersistenceError`s named as the repositories name them; a `COMMIT` the
 * server answers with `ROLLBACK` fails too, as on the Effect path.
 */
export const makePgLane = (
  sql: Client.SqlClient,
  parts: PgLaneParts,
  tables: TableNames,
  repositories: LaneDatabaseApi["repositories"]
): LaneDatabaseApi => {
  const { holds } = parts
  const query = preparedQuery(parts.prepare)

  /**
   * Runs one statement on a client of its own, handed back after
   * (discarded, as `pg`'s pool does, when it failed). A statement sent for
   * a lane call that ends before it answers gives its client up then (see
   * `laneCallNow`): it cannot apply after the call was answered.
   */
  const alone: Run = (text, params) => {
    const call = laneCallNow()
    return new Promise<Pg.QueryResult>((resolve, reject) => {
      holds.checkout((cause, held) => {
        if (cause !== undefined || held === undefined) return reject(cause)
        if (call?.expired === true) {
          held.release()
          return reject(new Error("the call ended before its statement was sent"))
        }
        const giveUp = () => held.giveUp("its call ended")
        if (call !== undefined && call.onEnd === undefined) call.onEnd = giveUp
        held.client.query(query(text, params), (failure: Error | null, result: Pg.QueryResult) => {
          if (call?.onEnd === giveUp) call.onEnd = undefined
          held.release(failure ?? undefined)
          if (failure === null || failure === undefined) resolve(result)
          else reject(failure)
        })
      })
    })
  }

  const rowsOn = (run: Run): DirectRowsOf<true> => {
    const result = (name: string, statement: Statement<unknown> | Compiled): Promise<Pg.QueryResult> => {
      let sent: Promise<Pg.QueryResult>
      try {
        const [text, params] = compiled(statement)
        sent = run(text, params)
      } catch (cause) {
        return Promise.reject(directFailure(name, cause))
      }
      return sent.catch((cause: unknown) => {
        throw directFailure(name, cause)
      })
    }
    // pg answers every statement later: these rows always answer with a Promise.
    return directRows(sql, tables, {
      rows: (name, statement) => result(name, statement).then((answered) => answered.rows as ReadonlyArray<RawRow>),
      touchedAny: (name, statement) => result(name, statement).then((answered) => (answered.rowCount ?? 0) > 0),
      map: (answer, then) => (answer as Promise<never>).then(then)
    }) as DirectRowsOf<true>
  }

  /** A checked-out client in a transaction; `release` hands it back, or discards it given an error; `abandon` gives it up. */
  const transactionOn = ({ client, release, giveUp }: HeldClient): DirectTransactionOf<true> => {
    let ended = false
    const end = (text: "COMMIT" | "ROLLBACK"): Promise<Pg.QueryResult> => {
      ended = true
      return client.query(text)
    }
    return {
      rows: rowsOn((text, params) => client.query(query(text, params))),
      commit: () => {
        if (ended) return Promise.resolve()
        return end("COMMIT").then(
          (answered) => {
            if (answered.command !== "ROLLBACK") return release()
            release()
            throw directFailure("transaction", new Error("COMMIT rolled the transaction back: a statement in it had failed"))
          },
          (cause: unknown) => {
            release(cause)
            throw directFailure("transaction", cause)
          }
        )
      },
      rollback: () => {
        if (ended) return Promise.resolve()
        return end("ROLLBACK").then(() => release(), (cause: unknown) => release(cause))
      },
      abandon: () => {
        ended = true
        return giveUp("its call ended inside its transaction")
      },
      // Called with interruption off (see the port), as withConnectionThen needs.
      joined: (effect) =>
        Effect.withFiberRuntime((fiber) => withConnectionThen(fiber.currentContext, parts.connectionOf(client), 0, effect, (exit) => exit))
    }
  }

  return {
    repositories,
    ...rowsOn(alone),
    free: () => true,
    begin: () =>
      new Promise<DirectTransactionOf<true>>((resolve, reject) => {
        holds.checkout((cause, held) => {
          if (cause !== undefined || held === undefined) {
            reject(directFailure("transaction", cause))
            return
          }
          // An error the client reports while held (its backend gone) is
          // heard by `holds`: the next statement on it fails, and so does the
          // ROLLBACK after, which discards it.
          const { client, release } = held
          client.query("BEGIN").then(
            () => resolve(transactionOn(held)),
            (failed: unknown) => {
              release(failed)
              reject(directFailure("transaction", failed))
            }
          )
        })
      })
  }
}
