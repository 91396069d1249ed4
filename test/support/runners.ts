import {
  type ConnectorOperation,
  ConnectorStore,
  clockFrom,
  OperationPolicy,
  type OperationPolicySettings,
  OperationRepository,
  type ProjectionWatch,
  type PromiseConnectorStore,
  type PromiseWinnerReaders,
  StoreSnapshot,
  type WatchIdentity,
  WatchRepository,
  WinnerReader
} from "@connector-store/core"
import {
  DirectDatabase,
  type DirectDatabaseOf,
  type DirectRowsOf,
  type DirectTransactionOf,
  fromPromiseReaders,
  LaneDatabase,
  makePromiseStore
} from "@connector-store/core/adapter"
import * as Memory from "@connector-store/memory-adapter"
import type { SqlTransaction } from "@connector-store/sql-adapter"
import { Cause, Context, Effect, Exit, Fiber, Layer, ManagedRuntime, Option } from "effect"
import { NOW } from "./contract/fixtures.js"
import { freshSqlitePath, PG_ADMIN_URL, pgAvailable, pgDatabaseForFile } from "./databases.js"
import { memoryPortsWithDirect, pgPortsWithLane, sqlitePortsWithDirect, withoutDirect } from "./direct.js"
import { layerWithPrefix } from "./pgPrefixes.js"

/**
 * Where a hot method runs: on the repository ports (`ports`), on the Effect
 * API's synchronous attempt over a `DirectDatabase` (`direct`), or on the
 * Promise API's lane over a `DirectDatabase` or `LaneDatabase` (`lane`).
 */
export type Runner = "ports" | "direct" | "lane"

/** The API a cell's calls go through. */
export type Api = "Effect" | "Promise"

/** The hot methods and the reads a cell's script needs, as Promises whichever API is under them. */
export type HotCalls = Pick<
  PromiseConnectorStore<unknown>,
  | "armWatch"
  | "claimWatchAttempt"
  | "deferWatch"
  | "recordVerification"
  | "claimOperation"
  | "markOperationSent"
  | "finalizeOperationAndArmWatch"
>

/**
 * The direct rows' calls a store made, by where they came from: made on a
 * fiber (the Effect API's direct path) or outside any fiber (the Promise
 * API's lane); and begins refused because the database was busy.
 */
export interface RowCalls {
  onFiber: number
  offFiber: number
  busy: number
}

/** A store of one cell: its hot calls, its rows, and what ran where. */
export interface CellStore extends HotCalls {
  /** The time the store decides at (NOW when it opens); tests move it. */
  readonly clock: { now: number }
  readonly seedWatches: (...rows: ReadonlyArray<ProjectionWatch>) => Promise<void>
  readonly seedOperations: (...rows: ReadonlyArray<ConnectorOperation>) => Promise<void>
  /** The stored watch, read on the ports (undefined when there is none). */
  readonly watch: (identity: WatchIdentity) => Promise<ProjectionWatch | undefined>
  /** The stored operation, read on the ports (undefined when there is none). */
  readonly operation: (key: { readonly callerDID: string; readonly operationID: string }) => Promise<ConnectorOperation | undefined>
  /** Every row of every table. */
  readonly snapshot: () => Promise<Record<string, ReadonlyArray<unknown>>>
  /** The direct rows' calls so far (all zero on a store that has none). */
  readonly rowCalls: RowCalls
  /**
   * Throws unless every hot call since the last check ran on the cell's
   * runner: on the ports, no direct row called; on the direct path, rows
   * called on a fiber and none outside one; on the lane, rows called outside
   * any fiber and none on one; never a busy begin (a call handed over).
   * Each hot call is checked on its own.
   */
  readonly expectRanOnRunner: () => void
  /** Throws unless no hot call since the last check reached the direct rows (bad input, say). */
  readonly expectNoRowCalls: () => void
  readonly close: () => Promise<void>
}

/** One adapter × runner cell: how to open a fresh, empty store whose hot methods run there. */
export interface RunnerCell {
  readonly adapter: "memory" | "sqlite" | "postgres"
  readonly runner: Runner
  readonly api: Api
  /** E.g. "memory × lane (Promise API)". */
  readonly name: string
  /** A fresh store deciding with `policy`, winners read by `readers`. */
  readonly open: (readers: PromiseWinnerReaders<unknown>, policy: OperationPolicySettings) => Promise<CellStore>
}

/** The fiber running now, if any. */
const onAFiber = (): boolean => Option.isSome(Fiber.getCurrentFiber())

/** `db` with every row call and every begun transaction counted in `calls`, by where it was made from. */
const counted = <Later extends boolean>(db: DirectDatabaseOf<Later>, calls: RowCalls): DirectDatabaseOf<Later> => {
  const count = (fiber: boolean) => fiber ? calls.onFiber++ : calls.offFiber++
  const each = <T extends object>(functions: T): T =>
    Object.fromEntries(Object.entries(functions).map(([name, call]) => [
      name,
      (...args: ReadonlyArray<unknown>) => {
        count(onAFiber())
        return (call as (...a: ReadonlyArray<unknown>) => unknown)(...args)
      }
    ])) as T
  const rows = (of: DirectRowsOf<Later>): DirectRowsOf<Later> => ({ watches: each(of.watches), operations: each(of.operations) })
  const begun = (fiber: boolean, transaction: DirectTransactionOf<Later> | undefined) => {
    if (transaction === undefined) {
      calls.busy++
      return undefined
    }
    count(fiber)
    return transaction.rows === undefined ? transaction : { ...transaction, rows: rows(transaction.rows) }
  }
  return {
    ...db,
    ...rows(db),
    begin: () => {
      const fiber = onAFiber()
      const answer = db.begin()
      return (answer instanceof Promise ? answer.then((transaction) => begun(fiber, transaction)) : begun(fiber, answer)) as never
    }
  }
}

/** `ports` with the DirectDatabase (and LaneDatabase) it offers counted in `calls`. */
const countedPorts = <P>(ports: Layer.Layer<P, unknown>, calls: RowCalls): Layer.Layer<P, unknown> =>
  Layer.effectContext(Effect.map(Effect.context<P>(), (context) => {
    let out = context as Context.Context<P | DirectDatabase | LaneDatabase>
    const direct = Context.getOption(out, DirectDatabase)
    if (Option.isSome(direct)) out = Context.add(out, DirectDatabase, counted(direct.value, calls))
    const lane = Context.getOption(out, LaneDatabase)
    if (Option.isSome(lane)) out = Context.add(out, LaneDatabase, counted(lane.value, calls))
    return out as Context.Context<P>
  })).pipe(Layer.provide(ports))

/** What each adapter's stores are built over, and the handle its winner readers get. */
interface AdapterPorts {
  readonly adapter: RunnerCell["adapter"]
  readonly ports: () => Promise<Layer.Layer<unknown, unknown>>
  readonly handle: unknown
}

const memoryPorts: AdapterPorts = {
  adapter: "memory",
  ports: async () => memoryPortsWithDirect() as Layer.Layer<unknown, unknown>,
  handle: { adapter: "memory" } satisfies Memory.MemoryTransaction
}

const sqlitePorts: AdapterPorts = {
  adapter: "sqlite",
  ports: async () => sqlitePortsWithDirect(freshSqlitePath()) as Layer.Layer<unknown, unknown>,
  handle: { dialect: "sqlite", query: () => Promise.resolve([]) } satisfies SqlTransaction
}

const postgresPorts: AdapterPorts = {
  adapter: "postgres",
  ports: async () => {
    if (!pgAvailable) throw new Error(`no Postgres server at ${PG_ADMIN_URL}`)
    const url = await pgDatabaseForFile()
    return layerWithPrefix(url, (tablePrefix) => pgPortsWithLane(url, tablePrefix)) as Layer.Layer<unknown, unknown>
  },
  handle: { dialect: "pg", query: () => Promise.resolve([]) } satisfies SqlTransaction
}

/** The answer of an Effect call as a Promise: its value, or a rejection with the typed failure itself. */
const settled = <A>(exit: Exit.Exit<A, unknown>): Promise<A> =>
  Exit.isSuccess(exit)
    ? Promise.resolve(exit.value)
    : Promise.reject(Option.getOrElse(Cause.failureOption(exit.cause), () => Cause.squash(exit.cause)))

/** Dies unless `row` was inserted. */
const refused = (row: unknown) => (inserted: boolean) => inserted ? Effect.void : Effect.dieMessage(`seed refused: ${JSON.stringify(row)}`)

/** Opens a store of `on` running `runner`. */
const openCell = (on: AdapterPorts, runner: Runner) =>
async (readers: PromiseWinnerReaders<unknown>, policy: OperationPolicySettings): Promise<CellStore> => {
  const calls: RowCalls = { onFiber: 0, offFiber: 0, busy: 0 }
  const base = await on.ports()
  const ports = countedPorts(on.adapter !== "postgres" && runner === "ports" ? withoutDirect(base) : base, calls)
  const clock = { now: NOW }
  const handle = Effect.succeed(on.handle)
  const runtime = ManagedRuntime.make(
    ConnectorStore.layer.pipe(
      Layer.provideMerge(Layer.succeed(WinnerReader, fromPromiseReaders(readers, handle))),
      Layer.provideMerge(ports as Layer.Layer<Memory.MemoryPorts>),
      Layer.provideMerge(Layer.succeed(OperationPolicy, policy))
    )
  )
  const run = <A, E>(effect: Effect.Effect<A, E, ManagedRuntime.ManagedRuntime.Context<typeof runtime>>): Promise<A> =>
    runtime.runPromiseExit(Effect.withClock(effect, clockFrom(() => clock.now))).then(settled)
  // What the store holds, proved once: the ports cells of memory and SQLite have no direct rows at all.
  const context = await runtime.runPromise(Effect.context<never>()) as Context.Context<DirectDatabase | LaneDatabase>
  const offered = Option.isSome(Context.getOption(context, DirectDatabase)) || Option.isSome(Context.getOption(context, LaneDatabase))
  const expectedOffer = !(runner === "ports" && on.adapter !== "postgres")
  if (offered !== expectedOffer) throw new Error(`${on.adapter} × ${runner}: direct rows ${offered ? "offered" : "absent"}`)

  let hot: HotCalls
  let close = () => runtime.dispose()
  if (runner === "lane") {
    const store = makePromiseStore<unknown>({ runtime: runtime as never, handle, now: () => clock.now, readers })
    hot = store
    close = () => store.close()
  } else {
    const effect = <A, E>(use: (store: ConnectorStore["Type"]) => Effect.Effect<A, E>) => run(Effect.flatMap(ConnectorStore, use))
    hot = {
      armWatch: (identity, reason, options) => effect((s) => s.armWatch(identity, reason, options)),
      claimWatchAttempt: (identity, options) => effect((s) => s.claimWatchAttempt(identity, options)),
      deferWatch: (identity, options) => effect((s) => s.deferWatch(identity, options)),
      recordVerification: (identity, input) => effect((s) => s.recordVerification(identity, input)),
      claimOperation: (input) => effect((s) => s.claimOperation(input)),
      markOperationSent: (key, options) => effect((s) => s.markOperationSent(key, options)),
      finalizeOperationAndArmWatch: (key, options) => effect((s) => s.finalizeOperationAndArmWatch(key, options))
    }
  }

  /** Each hot call's row calls, since the last check. */
  const made: Array<{ readonly method: string } & RowCalls> = []
  const watched = Object.fromEntries(Object.entries(hot).map(([method, call]) => [
    method,
    async (...args: ReadonlyArray<unknown>) => {
      const before = { ...calls }
      try {
        return await (call as (...a: ReadonlyArray<unknown>) => Promise<unknown>)(...args)
      } finally {
        made.push({
          method,
          onFiber: calls.onFiber - before.onFiber,
          offFiber: calls.offFiber - before.offFiber,
          busy: calls.busy - before.busy
        })
      }
    }
  ])) as unknown as HotCalls
  const check = (ranOnRunner: (call: RowCalls) => boolean, what: string) => {
    const wrong = made.splice(0).filter((call) => !ranOnRunner(call))
    if (wrong.length > 0) throw new Error(`${on.adapter} × ${runner}: expected ${what}, got ${JSON.stringify(wrong)}`)
  }
  const none = (call: RowCalls) => call.onFiber === 0 && call.offFiber === 0 && call.busy === 0
  return {
    ...watched,
    clock,
    seedWatches: async (...rows) => {
      await run(Effect.flatMap(WatchRepository, (repo) => Effect.forEach(rows, (row) => Effect.flatMap(repo.insert(row), refused(row)))))
    },
    seedOperations: async (...rows) => {
      await run(Effect.flatMap(OperationRepository, (repo) => Effect.forEach(rows, (row) => Effect.flatMap(repo.insert(row), refused(row)))))
    },
    watch: (identity) => run(Effect.map(Effect.flatMap(WatchRepository, (repo) => repo.get(identity)), Option.getOrUndefined)),
    operation: (key) => run(Effect.map(Effect.flatMap(OperationRepository, (repo) => repo.get(key)), Option.getOrUndefined)),
    snapshot: () => run(Effect.flatMap(StoreSnapshot, (s) => s.snapshot)) as Promise<Record<string, ReadonlyArray<unknown>>>,
    rowCalls: calls,
    expectRanOnRunner: () =>
      runner === "ports"
        ? check(none, "no direct row call")
        : runner === "direct"
        ? check((call) => call.onFiber > 0 && call.offFiber === 0 && call.busy === 0, "direct row calls on a fiber only")
        : check((call) => call.offFiber > 0 && call.onFiber === 0 && call.busy === 0, "direct row calls outside any fiber only"),
    expectNoRowCalls: () => check(none, "no direct row call"),
    close
  }
}

const API: Record<Runner, Api> = { ports: "Effect", direct: "Effect", lane: "Promise" }

const cell = (on: AdapterPorts, runner: Runner): RunnerCell => ({
  adapter: on.adapter,
  runner,
  api: API[runner],
  name: `${on.adapter} × ${runner} (${API[runner]} API)`,
  open: openCell(on, runner)
})

/**
 * Every adapter × runner cell there is: memory and SQLite on the ports, the
 * Effect API's direct path and the Promise API's lane; Postgres on the ports
 * and the lane (its Effect API keeps the ports). The ports cells of memory
 * and SQLite are their adapter's own ports with the `DirectDatabase` left
 * out. A Postgres cell's name says so, and without a server its store fails
 * to open (its suites are skipped, see `skipPostgresSuites`).
 */
export const runnerCells: ReadonlyArray<RunnerCell> = [
  cell(memoryPorts, "ports"),
  cell(memoryPorts, "direct"),
  cell(memoryPorts, "lane"),
  cell(sqlitePorts, "ports"),
  cell(sqlitePorts, "direct"),
  cell(sqlitePorts, "lane"),
  cell(postgresPorts, "ports"),
  cell(postgresPorts, "lane")
]
