import {
  clockFrom,
  ConnectorStore,
  OperationEntropy,
  type InvalidInput,
  OperationPolicy,
  type OperationPolicyOverrides,
  OperationRepository,
  PersistenceError,
  type PromiseConnectorStore,
  type PromiseWinnerReaders,
  WatchRepository,
  WinnerReader,
  WinnerReadFailed,
  type WinnerReaders
} from "@connector-store/core"
import { DirectDatabase, fromPromiseReaders, makePromiseStore } from "@connector-store/core/adapter"
import * as Memory from "@connector-store/memory-adapter"
import { Context, Effect, Layer, ManagedRuntime } from "effect"
import { Crash } from "./scheduler.js"

/** The rows a fault applies to: the write-back operations' or the watches'. */
export type WriteKind = "operation" | "watch"

/** The repository writes each kind has (every other method is a read). */
export const WRITE_METHODS: Readonly<Record<WriteKind, ReadonlyArray<string>>> = {
  operation: ["insert", "update", "markSent", "collectFinished"],
  watch: ["insert", "update", "claimAttempt", "deferAttempt", "delete"]
}

/** A clock the test moves, forwards and backwards: the store's decisions are made at its reading. */
export class TestClock {
  constructor(private at: number) {}
  /** The reading. */
  readonly now = (): number => this.at
  /** Moves the clock by `ms` (negative: back). */
  advance(ms: number): number {
    this.at += ms
    return this.at
  }
  /** Sets the clock to `at`. */
  set(at: number): void {
    this.at = at
  }
}

/** What the controller injected so far. */
export interface InjectedFaults {
  /** Writes failed with a `PersistenceError`. */
  readonly failedWrites: number
  /** Versioned writes that answered "lost". */
  readonly lostRaces: number
  /** Winner reads that failed. */
  readonly failedWinnerReads: number
  /** Calls crashed at a crash point. */
  readonly crashes: number
}

/**
 * A crash point of a store method, on either API: `before:<method>` (the
 * call is never made) or `after:<method>` (it is made, its answer is lost),
 * e.g. `after:finalizeOperationAndArmWatch`.
 */
export type CrashPoint = `before:${string}` | `after:${string}`

/**
 * Faults a test turns on, for a store opened with `openFaultyMemoryStore`
 * or `faultyMemoryLayer`: each arms the next matching event(s), and is used
 * up as they happen.
 */
export class FaultController {
  /** The store's clock. */
  readonly clock: TestClock
  private readonly failing: Record<WriteKind, Array<{ count: number; method: string | undefined }>> = { operation: [], watch: [] }
  private readonly losing: Record<WriteKind, number> = { operation: 0, watch: 0 }
  private winnerFailures = 0
  private readonly crashPoints = new Map<string, number>()
  private counts = { failedWrites: 0, lostRaces: 0, failedWinnerReads: 0, crashes: 0 }

  constructor(start: number = 1_700_000_000_000) {
    this.clock = new TestClock(start)
  }

  /** The next `count` writes of `kind` (only those of the repository method `method`, when given) fail with a `PersistenceError`. */
  failNextWrites(kind: WriteKind, count = 1, method?: string): void {
    this.failing[kind].push({ count, method })
  }

  /** The next `count` versioned writes (`update`) of `kind` answer "lost", as when another writer got there first. */
  loseNextRaces(kind: WriteKind, count = 1): void {
    this.losing[kind] += count
  }

  /** The next `count` winner reads fail (`WinnerReadFailed`). */
  failNextWinnerReads(count = 1): void {
    this.winnerFailures += count
  }

  /**
   * The next `count` calls reaching `point` crash there: through the Promise
   * API the call rejects with `Crash`; through the Effect API
   * (`faultyMemoryLayer`) its effect dies with `Crash` (a defect, never a
   * typed failure: the process is gone).
   */
  crashAt(point: CrashPoint, count = 1): void {
    this.crashPoints.set(point, (this.crashPoints.get(point) ?? 0) + count)
  }

  /** Turns every armed fault off (the clock stays where it is). */
  clear(): void {
    this.failing.operation.length = 0
    this.failing.watch.length = 0
    this.losing.operation = 0
    this.losing.watch = 0
    this.winnerFailures = 0
    this.crashPoints.clear()
  }

  /** What was injected so far. */
  get injected(): InjectedFaults {
    return { ...this.counts }
  }

  /** Consumes one armed write failure of `kind` for `method`, if any. @internal */
  takeWriteFailure(kind: WriteKind, method: string): boolean {
    const armed = this.failing[kind].find((f) => f.count > 0 && (f.method === undefined || f.method === method))
    if (armed === undefined) return false
    armed.count--
    this.counts.failedWrites++
    return true
  }

  /** Consumes one armed lost race of `kind`, if any. @internal */
  takeLostRace(kind: WriteKind): boolean {
    if (this.losing[kind] <= 0) return false
    this.losing[kind]--
    this.counts.lostRaces++
    return true
  }

  /** Consumes one armed winner-read failure, if any. @internal */
  takeWinnerFailure(): boolean {
    if (this.winnerFailures <= 0) return false
    this.winnerFailures--
    this.counts.failedWinnerReads++
    return true
  }

  /** Consumes one armed crash at `point`, if any. @internal */
  takeCrash(point: string): boolean {
    const left = this.crashPoints.get(point) ?? 0
    if (left <= 0) return false
    this.crashPoints.set(point, left - 1)
    this.counts.crashes++
    return true
  }
}

const injected = (kind: WriteKind, method: string) =>
  Effect.fail(new PersistenceError({ operation: `${kind}.${method}`, cause: new Error(`injected fault: ${kind}.${method} failed`) }))

/**
 * `updateWithWatch` under `faults`: it is the operation's `update` and then
 * the watch's `insert`, `update` or `delete`, so the faults of each apply,
 * in that order, as they would to the two writes made one after the other.
 */
type PairedWriteOf = OperationRepository["Type"]["updateWithWatch"]
const pairedUnder = (original: PairedWriteOf, faults: FaultController): PairedWriteOf => (previous, next, watch) =>
  Effect.suspend(() => {
    if (faults.takeWriteFailure("operation", "update")) return injected("operation", "update")
    if (faults.takeLostRace("operation")) return Effect.succeed("operation-lost" as const)
    if (faults.takeWriteFailure("watch", watch.kind)) return injected("watch", watch.kind)
    if (watch.kind === "update" && faults.takeLostRace("watch")) return Effect.succeed("watch-lost" as const)
    return original(previous, next, watch)
  })

const decorate = <S extends object>(service: S, kind: WriteKind, faults: FaultController): S => {
  const out: Record<string, unknown> = { ...(service as unknown as Record<string, unknown>) }
  const paired = (service as Partial<OperationRepository["Type"]>).updateWithWatch
  if (kind === "operation" && paired !== undefined) out["updateWithWatch"] = pairedUnder(paired, faults)
  for (const method of WRITE_METHODS[kind]) {
    const original = (service as unknown as Record<string, unknown>)[method]
    if (typeof original !== "function") continue
    out[method] = (...args: ReadonlyArray<unknown>) =>
      Effect.suspend(() => {
        if (faults.takeWriteFailure(kind, method)) return injected(kind, method)
        if (method === "update" && faults.takeLostRace(kind)) return Effect.succeed(false)
        return (original as (...a: ReadonlyArray<unknown>) => Effect.Effect<unknown>)(...args)
      })
  }
  return out as S
}

/**
 * The memory adapter's ports over a fresh database, with the operation and
 * watch repositories under `faults`. The decorated ports turn the adapter's
 * direct rows off: every call runs on the ports, where the faults are.
 */
export const faultyMemoryPorts = (faults: FaultController): Layer.Layer<Memory.MemoryPorts> =>
  Layer.effectContext(Effect.map(Effect.context<Memory.MemoryPorts>(), (ports) => {
    const without = Context.omit(DirectDatabase)(ports as Context.Context<Memory.MemoryPorts | DirectDatabase>) as Context.Context<Memory.MemoryPorts>
    return without.pipe(
      Context.add(OperationRepository, decorate(Context.get(ports, OperationRepository), "operation", faults)),
      Context.add(WatchRepository, decorate(Context.get(ports, WatchRepository), "watch", faults))
    )
  })).pipe(Layer.provide(Memory.layerPorts))

const faultyReaders = (readers: WinnerReaders, faults: FaultController): WinnerReaders => {
  const failed = (documentID: string) => new WinnerReadFailed({ documentID, cause: new Error("injected fault: the winner reader failed") })
  const { readWinner, readWinners } = readers
  return {
    readWinner: readWinner === undefined ? undefined : (documentID) =>
      Effect.suspend(() => faults.takeWinnerFailure() ? Effect.fail(failed(documentID)) : readWinner(documentID)),
    readWinners: readWinners === undefined ? undefined : (documentIDs) =>
      Effect.suspend(() => faults.takeWinnerFailure() ? Effect.fail(failed(documentIDs[0] ?? "")) : readWinners(documentIDs))
  }
}

/** `service` with each method passing the crash points `before:<method>` and `after:<method>` of `faults`. */
const crashing = (service: ConnectorStore["Type"], faults: FaultController): ConnectorStore["Type"] => {
  const out: Record<string, unknown> = { ...(service as unknown as Record<string, unknown>) }
  for (const [method, fn] of Object.entries(service as unknown as Record<string, unknown>)) {
    if (typeof fn !== "function") continue
    out[method] = (...args: ReadonlyArray<unknown>) => {
      const call = (fn as (...a: ReadonlyArray<unknown>) => unknown)(...args)
      if (!Effect.isEffect(call)) return call
      return Effect.suspend(() =>
        faults.takeCrash(`before:${method}`)
          ? Effect.die(new Crash("store", `before:${method}`))
          : Effect.flatMap(call, (answer) =>
            Effect.suspend(() => faults.takeCrash(`after:${method}`) ? Effect.die(new Crash("store", `after:${method}`)) : Effect.succeed(answer))))
    }
  }
  return out as unknown as ConnectorStore["Type"]
}

/**
 * The Effect API over the faulty memory ports: `ConnectorStore`, its ports
 * and the winner reader (under `faults` too), with the store's policy and
 * `Clock` on `faults.clock`. Build it per test for a fresh store. Each
 * `ConnectorStore` method passes the crash points `before:<method>` and
 * `after:<method>`: a crash there dies with `Crash`.
 */
export const faultyMemoryLayer = (
  faults: FaultController,
  readers: WinnerReaders = {},
  operationPolicy: OperationPolicyOverrides = {}
): Layer.Layer<ConnectorStore | Memory.MemoryPorts | WinnerReader | OperationPolicy, PersistenceError | InvalidInput> =>
  ConnectorStore.layer.pipe(
    Layer.map((context) => Context.add(context, ConnectorStore, crashing(Context.get(context, ConnectorStore), faults))),
    Layer.provideMerge(Layer.mergeAll(faultyMemoryPorts(faults), Layer.succeed(WinnerReader, faultyReaders(readers, faults)), OperationPolicy.layer(operationPolicy))),
    Layer.provideMerge(Layer.setClock(clockFrom(faults.clock.now)))
  ) as never

/** The options of `openFaultyMemoryStore`. */
export interface FaultyMemoryStoreOptions extends PromiseWinnerReaders<Memory.MemoryTransaction> {
  /** Lease, attempt and backoff settings of write-back operations, over the defaults. */
  readonly operationPolicy?: OperationPolicyOverrides | undefined
  /** The faults (and clock) to use; a fresh controller by default. */
  readonly faults?: FaultController | undefined
  /**
   * Where the store's lease tokens and other random ids come from (random
   * UUIDs by default). A counter makes a run's calls, and its trace, the
   * same every time it is replayed.
   */
  readonly token?: (() => string) | undefined
}

/** A memory store with the Promise API whose storage, winner reads and calls fail as its `faults` say. */
export interface FaultyMemoryStore extends PromiseConnectorStore<Memory.MemoryTransaction> {
  /** The store's clock (`faults.clock`). */
  now(): number
  /** The faults this store is under. */
  readonly faults: FaultController
}

const handle = Effect.succeed<Memory.MemoryTransaction>({ adapter: "memory" })

/**
 * Opens an empty memory store with the Promise API, as
 * `openMemoryConnectorStore` does, under a fault controller: its clock is
 * `faults.clock`, its operation and watch writes fail or lose as armed, its
 * winner reads fail as armed, and each method call passes the crash points
 * `before:<method>` and `after:<method>`.
 */
export const openFaultyMemoryStore = (options: FaultyMemoryStoreOptions = {}): FaultyMemoryStore => {
  const faults = options.faults ?? new FaultController()
  const readers = { readWinner: options.readWinner, readWinners: options.readWinners }
  const layered = ConnectorStore.layer.pipe(
    Layer.provideMerge(Layer.mergeAll(
      faultyMemoryPorts(faults),
      Layer.succeed(WinnerReader, faultyReaders(fromPromiseReaders(readers, handle), faults)),
      OperationPolicy.layer(options.operationPolicy),
      options.token === undefined ? Layer.empty : Layer.succeed(OperationEntropy, { token: options.token })
    ))
  )
  const store = makePromiseStore({ runtime: ManagedRuntime.make(layered), handle, now: faults.clock.now, readers })
  const wrapped: Record<string, unknown> = { ...store }
  for (const [method, fn] of Object.entries(store)) {
    if (typeof fn !== "function" || method === "close" || method === "runEffect") continue
    wrapped[method] = async (...args: ReadonlyArray<unknown>) => {
      if (faults.takeCrash(`before:${method}`)) throw new Crash("store", `before:${method}`)
      const answer = await (fn as (...a: Array<unknown>) => Promise<unknown>).apply(store, [...args])
      if (faults.takeCrash(`after:${method}`)) throw new Crash("store", `after:${method}`)
      return answer
    }
  }
  return { ...(wrapped as unknown as PromiseConnectorStore<Memory.MemoryTransaction>), now: faults.clock.now, faults }
}
