import { OperationRepository, type ProjectionWatch, type PromiseConnectorStore, WatchRepository } from "@connector-store/core"
import type { SqlTransaction } from "@connector-store/sql-adapter"
import { Effect, Layer } from "effect"
import fc from "fast-check"
import { afterEach, describe, expect, it } from "vitest"
import { claimInput } from "./operations.fixtures.js"
import { identityOf, NOW, watchRow } from "./support/contract/fixtures.js"
import { seedWatches } from "./support/contract/store.js"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"
import { memoryPortsWithDirect, pgPortsWithLane, sqlitePortsWithDirect } from "./support/direct.js"
import { clock, normalized, promiseStoreOver } from "./support/laneScript.js"
import { propertyRuns } from "./support/runs.js"

/**
 * The Promise API's lane against the Effect path, differentially: random
 * sequences of hot calls (claims, verifications, deferrals, arms, operation
 * claims, marks and finalizes, by holders and by strangers, with stale
 * inputs and a moving clock) run on two stores over the same adapter, one
 * with the lane and one without; every answer, every error and the rows at
 * the end must be the same, and so must the winner reads each made. The
 * winner reader answers at once or with a Promise, and fails (throws, or
 * rejects) for a document made unreadable.
 */

const closing: Array<() => Promise<void>> = []
afterEach(async () => {
  await Promise.all(closing.splice(0).map((close) => close()))
  clock.now = NOW
})

const SOURCES = 3
const KEYS = 3
/** A winner that stands for "the document store cannot read this document": the reader fails. */
const UNREADABLE = "unreadable"

type Command =
  | { readonly kind: "tick"; readonly ms: number }
  | { readonly kind: "winner"; readonly document: number; readonly digest: string }
  | { readonly kind: "claimWatch"; readonly source: number; readonly stale: boolean; readonly forMs: number }
  | { readonly kind: "verify"; readonly source: number; readonly fetched: "winner" | "other" | null; readonly staleClaim: boolean; readonly maxAttempts: number }
  | { readonly kind: "defer"; readonly source: number; readonly byMs: number; readonly holder: boolean }
  | { readonly kind: "arm"; readonly source: number; readonly reason: "manual" | "ingress"; readonly triggeringMatches: boolean }
  | { readonly kind: "claimOperation"; readonly key: number; readonly otherPayload: boolean }
  | { readonly kind: "markSent"; readonly key: number; readonly holder: boolean }
  | { readonly kind: "finalize"; readonly key: number; readonly holder: boolean; readonly document: number }

/** A holder's call three times in four, a stranger's the fourth. */
const mostly = fc.constantFrom(true, true, true, false)

const command: fc.Arbitrary<Command> = fc.oneof(
  fc.record({ kind: fc.constant("tick" as const), ms: fc.constantFrom(0, 1_000, 11_000, 120_000) }),
  fc.record({ kind: fc.constant("winner" as const), document: fc.nat(SOURCES - 1), digest: fc.constantFrom("w-a", "w-b", UNREADABLE) }),
  fc.record({ kind: fc.constant("claimWatch" as const), source: fc.nat(SOURCES - 1), stale: fc.boolean(), forMs: fc.constantFrom(5_000, 30_000) }),
  fc.record({
    kind: fc.constant("verify" as const),
    source: fc.nat(SOURCES - 1),
    fetched: fc.constantFrom("winner" as const, "other" as const, null),
    staleClaim: fc.boolean(),
    maxAttempts: fc.integer({ min: 1, max: 3 })
  }),
  fc.record({ kind: fc.constant("defer" as const), source: fc.nat(SOURCES - 1), byMs: fc.constantFrom(1_000, 60_000), holder: mostly }),
  fc.record({
    kind: fc.constant("arm" as const),
    source: fc.nat(SOURCES - 1),
    reason: fc.constantFrom("manual" as const, "ingress" as const),
    triggeringMatches: fc.boolean()
  }),
  fc.record({ kind: fc.constant("claimOperation" as const), key: fc.nat(KEYS - 1), otherPayload: fc.boolean() }),
  fc.record({ kind: fc.constant("markSent" as const), key: fc.nat(KEYS - 1), holder: mostly }),
  fc.record({ kind: fc.constant("finalize" as const), key: fc.nat(KEYS - 1), holder: mostly, document: fc.nat(SOURCES - 1) })
)

const identity = (source: number) => identityOf({ sourceID: `src-${source}` })
const operationKey = (key: number) => ({ callerDID: "did:caller:1", operationID: `op-${key}` })

/** One store of the pair, with the lease tokens its own claims handed out. */
interface Side {
  readonly store: PromiseConnectorStore<SqlTransaction>
  readonly tokens: Map<number, string>
  readonly answers: Array<unknown>
  /** Every document id its winner reader was called for, in order. */
  readonly reads: Array<string>
}

/** Runs `command` on `side`; the inputs that depend on a row are taken from `watches`, read before the command ran anywhere. */
const apply = async (
  side: Side,
  watches: ReadonlyArray<ProjectionWatch | null>,
  command: Command,
  winners: Map<string, string>
): Promise<void> => {
  const { store } = side
  const record = async (call: () => Promise<unknown>) => {
    try {
      side.answers.push(await call())
    } catch (error) {
      side.answers.push({ rejected: error })
    }
  }
  const rowOf = (source: number) => watches[source]
  switch (command.kind) {
    case "tick":
    case "winner":
      return
    case "claimWatch": {
      const row = rowOf(command.source)
      const generation = (row?.repairGeneration ?? 1) - (command.stale ? 1 : 0)
      return record(() => store.claimWatchAttempt(identity(command.source), { until: clock.now + command.forMs, generation, now: clock.now }))
    }
    case "verify": {
      const row = rowOf(command.source)
      const fetched = command.fetched === "winner" ? winners.get(`doc-${command.source}`) ?? `w-doc-${command.source}` : command.fetched
      return record(() =>
        store.recordVerification(identity(command.source), {
          generation: row?.repairGeneration ?? 1,
          claimedUntil: command.staleClaim ? clock.now - 1 : row?.claimedUntil ?? null,
          fetchedDigest: fetched,
          maxAttempts: command.maxAttempts,
          dueAt: clock.now + 1_000
        })
      )
    }
    case "defer": {
      const row = rowOf(command.source)
      return record(() =>
        store.deferWatch(identity(command.source), {
          nextAttemptAt: clock.now + command.byMs,
          generation: row?.repairGeneration ?? 1,
          // A stranger names a claim that is not the row's.
          claimedUntil: (row?.claimedUntil ?? clock.now) + (command.holder ? 0 : 1)
        })
      )
    }
    case "arm":
      return record(() =>
        store.armWatch(identity(command.source), command.reason, {
          dueAt: clock.now + 2_000,
          ...(command.reason === "ingress"
            ? { triggeringWinner: command.triggeringMatches ? winners.get(`doc-${command.source}`) ?? `w-doc-${command.source}` : "w-elsewhere" }
            : {})
        })
      )
    case "claimOperation":
      return record(async () => {
        const claimed = await store.claimOperation(claimInput({
          ...operationKey(command.key),
          sourceID: `src-${command.key}`,
          deterministicEventID: `event-${command.key}`,
          payloadHash: command.otherPayload ? "hash-other" : "hash-1",
          documentID: `doc-${command.key}`
        }))
        if (claimed.outcome === "claimed") side.tokens.set(command.key, claimed.lease.token)
        return claimed
      })
    case "markSent":
      return record(() =>
        store.markOperationSent(operationKey(command.key), {
          leaseToken: command.holder ? side.tokens.get(command.key) ?? "never-claimed" : "a-stranger"
        })
      )
    case "finalize":
      return record(() =>
        store.finalizeOperationAndArmWatch(operationKey(command.key), {
          leaseToken: command.holder ? side.tokens.get(command.key) ?? "never-claimed" : "a-stranger",
          sourceID: `src-${command.key}`,
          documentID: `doc-${command.document}`,
          providerEtag: "etag-1",
          resultEntity: { id: command.key },
          watchDueAt: clock.now + 5_000
        })
      )
  }
}

type Reader = (documentID: string) => string | Promise<string>

/**
 * How a side's calls run: on the Promise API's lane; on the Effect path
 * (which on SQLite and in memory takes the Effect API's own direct path);
 * or, on SQLite and in memory, on the Effect path over the ports alone (the
 * repositories decorated, so no direct path applies).
 */
type Path = "lane" | "effect" | "ports"

/**
 * The differential property over stores made by `open`, one per path in
 * `paths` (the first is the lane; the rows every input is taken from are the
 * last one's), with a winner reader that answers at once (`reader` "sync")
 * or with a Promise ("async").
 */
const laneAgrees = (
  open: (path: Path, readers: { readWinner: Reader }) => { store: PromiseConnectorStore<SqlTransaction> },
  numRuns: number,
  reader: "sync" | "async" = "sync",
  paths: ReadonlyArray<Path> = ["lane", "effect"]
) =>
  fc.assert(
    fc.asyncProperty(fc.array(command, { minLength: 4, maxLength: 24 }), async (commands) => {
      clock.now = NOW
      const winners = new Map<string, string>()
      const read = (documentID: string): string => {
        const winner = winners.get(documentID) ?? `w-${documentID}`
        if (winner === UNREADABLE) throw new Error(`the document store cannot read ${documentID}`)
        return winner
      }
      // Each side's reader logs its calls: every path must call it as often, for the same documents.
      const sides = paths.map((path): Side => {
        const reads: Array<string> = []
        const logged = (documentID: string): string => {
          reads.push(documentID)
          return read(documentID)
        }
        const readers = { readWinner: reader === "async" ? async (documentID: string) => logged(documentID) : logged }
        return { store: open(path, readers).store, tokens: new Map(), answers: [], reads }
      })
      const seeds = Array.from({ length: SOURCES }, (_, n) =>
        watchRow({ sourceID: `src-${n}`, documentID: `doc-${n}`, nextAttemptAt: NOW - 1, claimedUntil: null }))
      for (const side of sides) await side.store.runEffect(seedWatches(...seeds))
      for (const each of commands) {
        if (each.kind === "tick") clock.now += each.ms
        if (each.kind === "winner") winners.set(`doc-${each.document}`, each.digest)
        // Inputs that depend on a row come from the last side's rows before the command, the same for every side.
        const last = sides[sides.length - 1]!
        const watches = await Promise.all(Array.from({ length: SOURCES }, (_, n) => last.store.getWatch(identity(n))))
        for (const side of sides) await apply(side, watches, each, winners)
      }
      const rows = await Promise.all(sides.map(async (side) => [
        await Promise.all(Array.from({ length: SOURCES }, (_, n) => side.store.getWatch(identity(n)))),
        await Promise.all(Array.from({ length: KEYS }, (_, n) => side.store.getOperation(operationKey(n))))
      ]))
      for (let n = 1; n < sides.length; n++) {
        expect(normalized([...sides[n]!.answers, rows[n], sides[n]!.reads]), paths[n])
          .toEqual(normalized([...sides[0]!.answers, rows[0], sides[0]!.reads]))
      }
      await Promise.all(closing.splice(0).map((close) => close()))
    }),
    { numRuns: propertyRuns(numRuns) }
  )

/** `ports` with both repositories decorated (copied), so that no direct path is for them (see `directFor`). */
const decorated = <P>(ports: Layer.Layer<P, unknown>) =>
  Layer.mergeAll(
    Layer.effect(WatchRepository, Effect.map(WatchRepository, (watches) => ({ ...watches }))),
    Layer.effect(OperationRepository, Effect.map(OperationRepository, (operations) => ({ ...operations })))
  ).pipe(Layer.provideMerge(ports)) as unknown as Layer.Layer<unknown, unknown>

/** A Promise store on a fresh SQLite file whose calls take `path`. */
const sqliteSide = (path: Path, readers: { readWinner: Reader }) => {
  const ports = sqlitePortsWithDirect(freshSqlitePath()) as Layer.Layer<unknown, unknown>
  return promiseStoreOver(path === "ports" ? decorated(ports) : ports, readers, { lane: path === "lane", dialect: "sqlite" }, closing)
}

/** A Promise store on a fresh memory database whose calls take `path`. */
const memorySide = (path: Path, readers: { readWinner: Reader }) => {
  const ports = memoryPortsWithDirect() as Layer.Layer<unknown, unknown>
  return promiseStoreOver(path === "ports" ? decorated(ports) : ports, readers, { lane: path === "lane", dialect: "memory" }, closing)
}

// These runs only show that the store's internal runners agree (the lane, the direct path, the ports), not
// a guarantee of their own: half the runs they had; CONNECTOR_STORE_MODEL_RUNS=400 runs them as many as before.
describe("the Promise API's lane, the Effect API's direct path and the ports agree on random sequences of hot calls", () => {
  it("in memory", async () => {
    await laneAgrees(memorySide, 50, "sync", ["lane", "effect", "ports"])
  })

  it("in memory, with a winner reader that answers with a Promise", async () => {
    await laneAgrees(memorySide, 50, "async", ["lane", "effect", "ports"])
  })

  it("on SQLite", async () => {
    await laneAgrees(sqliteSide, 20, "sync", ["lane", "effect", "ports"])
  })

  it("on SQLite, with a winner reader that answers with a Promise", async () => {
    await laneAgrees(sqliteSide, 20, "async", ["lane", "effect", "ports"])
  })

  it.runIf(pgAvailable)("on Postgres", async () => {
    const url = await pgDatabaseForFile()
    await laneAgrees((path, readers) =>
      promiseStoreOver(pgPortsWithLane(url, freshPrefix()) as Layer.Layer<unknown, unknown>, readers, { lane: path === "lane", dialect: "pg" }, closing), 10)
  })

  it.runIf(pgAvailable)("on Postgres, with a winner reader that answers with a Promise", async () => {
    const url = await pgDatabaseForFile()
    await laneAgrees((path, readers) =>
      promiseStoreOver(pgPortsWithLane(url, freshPrefix()) as Layer.Layer<unknown, unknown>, readers, { lane: path === "lane", dialect: "pg" }, closing), 10, "async")
  })
})
