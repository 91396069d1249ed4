import {
  blankSyncState,
  ConnectorStore,
  OperationRepository,
  type PairedWrite,
  RelistRepository,
  type SyncStateRow,
  SyncStateRepository,
  Transactor,
  WatchRepository,
  type WatchWrite
} from "@connector-store/core"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Option, TestClock } from "effect"
import { identityOf, NOW, operationRow, watchRow } from "./support/contract/fixtures.js"
import { at, onFreshStore, seedOperations, seedWatches, snapshot, storedOperation, storedWatch } from "./support/contract/store.js"
import { adaptersUnderTest } from "./support/stores.js"

// Every versioned or token-fenced write of every repository port, called
// directly (no lock, no service) with a stale guard: it must answer false
// and leave every table exactly as it was. Then the same write with the
// current guard lands, so the refusal is the guard's doing, not the row's.

const adapters = await adaptersUnderTest()

/** Runs a write that must lose; asserts it answered false and no table changed. */
const loses = <E, R>(write: Effect.Effect<boolean, E, R>, label: string) =>
  Effect.gen(function*() {
    const before = yield* snapshot
    expect(yield* write, label).toBe(false)
    expect(yield* snapshot, label).toEqual(before)
  })

const key = { connectorName: "gcal", ownerDID: "did:owner:1" }
const syncRow: SyncStateRow = {
  ...blankSyncState(key, "inc-1"),
  checkpoint: { page: 1 },
  version: 4,
  leaseToken: "token-1",
  leaseExpiresAt: NOW + 60_000
}

for (const adapter of adapters) {
  describe(`stale writes lose on ${adapter.name}`, () => {
    it.effect("watch update and delete with a stale version write nothing; the current version writes", () =>
      onFreshStore(adapter, {}, Effect.gen(function*() {
        const repo = yield* WatchRepository
        const row = watchRow({ version: 3 })
        const id = identityOf()
        yield* seedWatches(row)
        const next = { ...row, verificationStatus: "verified" as const, nextAttemptAt: null, version: 4 }
        for (const stale of [0, 2, 4, 5]) {
          yield* loses(repo.update({ ...row, version: stale }, next), `update at ${stale}`)
          yield* loses(repo.delete(id, stale), `delete at ${stale}`)
        }
        expect(yield* storedWatch(id)).toEqual(row)
        expect(yield* repo.update(row, next)).toBe(true)
        expect(yield* storedWatch(id)).toEqual(next)
        // The version that was current a moment ago is now stale too.
        yield* loses(repo.update(row, { ...next, version: 5, documentID: "doc-x" }), "update at the replaced version")
        yield* loses(repo.delete(id, 3), "delete at the replaced version")
        expect(yield* repo.delete(id, 4)).toBe(true)
        expect(Option.isNone(yield* repo.get(id))).toBe(true)
      })))

    it.effect("operation update with a stale version writes nothing; the current version writes", () =>
      onFreshStore(adapter, {}, Effect.gen(function*() {
        const repo = yield* OperationRepository
        const row = operationRow({ state: "attempted", version: 2, leaseToken: "lease-a", leaseExpiresAt: NOW + 10 })
        yield* seedOperations(row)
        const next = { ...row, state: "committed" as const, leaseToken: null, leaseExpiresAt: null, version: 3 }
        for (const stale of [0, 1, 3, 7]) yield* loses(repo.update({ ...row, version: stale }, next), `update at ${stale}`)
        expect(yield* storedOperation(row)).toEqual(row)
        expect(yield* repo.update(row, next)).toBe(true)
        expect(yield* storedOperation(row)).toEqual(next)
        yield* loses(repo.update(row, { ...next, attempts: 9, version: 4 }), "update at the replaced version")
        expect(yield* storedOperation(row)).toEqual(next)
      })))

    it.effect("the paired write of an operation and its watch: each guard that loses is named, and the try leaves no trace", () =>
      onFreshStore(adapter, {}, Effect.gen(function*() {
        const repo = yield* OperationRepository
        const { withTransaction } = yield* Transactor
        const row = operationRow({ state: "attempted", version: 2, leaseToken: "lease-a", leaseExpiresAt: NOW + 10 })
        const watch = watchRow({ version: 3 })
        const id = identityOf()
        yield* seedOperations(row)
        yield* seedWatches(watch)
        const next = { ...row, state: "committed" as const, leaseToken: null, leaseExpiresAt: null, version: 3 }
        const opened = { ...watch, verificationStatus: "pending_verification" as const, repairGeneration: 2, version: 4 }
        const elsewhere = identityOf({ sourceID: "src-2" })
        /**
         * The paired write in a transaction rolled back after it, as a lost
         * try is: answers `expected`, and leaves every table as it was.
         */
        const pairedLoses = (write: WatchWrite, expected: PairedWrite, label: string, previous = row) =>
          Effect.gen(function*() {
            const before = yield* snapshot
            const written = repo.updateWithWatch(previous, next, write)
            const answered = yield* Effect.flip(withTransaction(Effect.flatMap(written, Effect.fail)))
            expect(answered, label).toBe(expected)
            expect(yield* snapshot, label).toEqual(before)
          })
        const update: WatchWrite = { kind: "update", previous: watch, next: opened }
        const insertElsewhere: WatchWrite = { kind: "insert", row: watchRow({ ...elsewhere, documentID: "doc-9" }) }
        for (const stale of [0, 1, 3, 7]) {
          yield* pairedLoses(update, "operation-lost", `operation at ${stale}`, { ...row, version: stale })
          // Nothing is written when the operation's guard loses, in a transaction or not.
          const alone = repo.updateWithWatch({ ...row, version: stale }, next, insertElsewhere)
          yield* loses(Effect.map(alone, (written) => written !== "operation-lost"), `operation at ${stale}, alone`)
        }
        for (const stale of [0, 2, 4, 5]) {
          yield* pairedLoses({ ...update, previous: { ...watch, version: stale } }, "watch-lost", `watch update at ${stale}`)
          yield* pairedLoses({ kind: "delete", identity: id, version: stale }, "watch-lost", `watch delete at ${stale}`)
        }
        yield* pairedLoses({ kind: "insert", row: { ...watch, version: 0 } }, "watch-lost", "insert over the identity's row")
        const slotTaken: WatchWrite = { kind: "insert", row: watchRow({ ...elsewhere, version: 0 }) }
        yield* pairedLoses(slotTaken, "watch-lost", "insert into the taken document slot")
        expect(yield* storedOperation(row)).toEqual(row)
        expect(yield* storedWatch(id)).toEqual(watch)
        expect(yield* repo.updateWithWatch(row, next, update)).toBe("written")
        expect(yield* storedOperation(row)).toEqual(next)
        expect(yield* storedWatch(id)).toEqual(opened)
        const after = { ...next, attempts: 9, version: 4 }
        yield* pairedLoses({ kind: "delete", identity: id, version: 3 }, "watch-lost", "delete at the replaced version", next)
        expect(yield* repo.updateWithWatch(next, after, { kind: "delete", identity: id, version: 4 })).toBe("written")
        expect(yield* storedOperation(row)).toEqual(after)
        expect(Option.isNone(yield* (yield* WatchRepository).get(id))).toBe(true)
        const inserted = watchRow({ ...elsewhere, version: 0 })
        expect(yield* repo.updateWithWatch(after, { ...after, version: 5 }, { kind: "insert", row: inserted })).toBe("written")
        expect(yield* storedWatch(elsewhere)).toEqual(inserted)
      })))

    it.effect("sync-state progress and status writes need both the version and the incarnation", () =>
      onFreshStore(adapter, {}, Effect.gen(function*() {
        const repo = yield* SyncStateRepository
        expect(yield* repo.insert(syncRow)).toBe(true)
        const progressed: SyncStateRow = { ...syncRow, checkpoint: { page: 2 }, recovery: ["r"], version: 5 }
        const statused: SyncStateRow = { ...syncRow, status: "error", error: "boom", entityCount: 3, version: 5 }
        const stale = [
          { version: 3, incarnation: "inc-1" },
          { version: 5, incarnation: "inc-1" },
          { version: 4, incarnation: "inc-0" },
          { version: 4, incarnation: null }
        ]
        for (const expected of stale) {
          yield* loses(Effect.map(repo.updateProgress(progressed, expected, []), Option.isSome), `progress at ${JSON.stringify(expected)}`)
          yield* loses(repo.updateStatus(statused, expected), `status at ${JSON.stringify(expected)}`)
        }
        expect(Option.getOrThrow(yield* repo.get(key))).toEqual(syncRow)
        expect(Option.getOrThrow(yield* repo.updateProgress(progressed, { version: 4, incarnation: "inc-1" }, []))).toEqual(progressed)
        expect(Option.getOrThrow(yield* repo.get(key))).toEqual(progressed)
        yield* loses(repo.updateStatus(statused, { version: 4, incarnation: "inc-1" }), "status at the replaced version")
        expect(yield* repo.updateStatus(statused, { version: 5, incarnation: "inc-1" })).toBe(true)
        expect(Option.getOrThrow(yield* repo.get(key))).toMatchObject({ status: "error", error: "boom", version: 5 })
      })))

    it.effect("the sync-lease write with a stale token, expiry or incarnation writes nothing", () =>
      onFreshStore(adapter, {}, Effect.gen(function*() {
        const repo = yield* SyncStateRepository
        expect(yield* repo.insert(syncRow)).toBe(true)
        const taken: SyncStateRow = { ...syncRow, leaseToken: "token-2", leaseExpiresAt: NOW + 120_000 }
        const current = { incarnation: "inc-1", leaseToken: "token-1", leaseExpiresAt: NOW + 60_000 }
        const stale = [
          { ...current, leaseToken: "token-0" },
          { ...current, leaseToken: null },
          { ...current, leaseExpiresAt: NOW + 59_999 },
          { ...current, leaseExpiresAt: null },
          { ...current, incarnation: "inc-0" }
        ]
        for (const expected of stale) yield* loses(repo.updateLease(taken, expected), `lease at ${JSON.stringify(expected)}`)
        expect(Option.getOrThrow(yield* repo.get(key))).toEqual(syncRow)
        expect(yield* repo.updateLease(taken, current)).toBe(true)
        expect(Option.getOrThrow(yield* repo.get(key))).toEqual(taken)
        // The previous holder's token no longer renews or releases.
        const released = { ...syncRow, leaseToken: null, leaseExpiresAt: null }
        yield* loses(repo.updateLease(released, current), "release by the previous holder")
        expect(Option.getOrThrow(yield* repo.get(key))).toEqual(taken)
      })))

    it.effect("relist run and candidate writes with a stale version (or another run) write nothing", () =>
      onFreshStore(adapter, {}, Effect.gen(function*() {
        const scope = { ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1" }
        const tracked = (sourceID: string) =>
          watchRow({ ...scope, sourceID, documentID: `doc-${sourceID}`, verificationStatus: "verified", nextAttemptAt: null })
        yield* at(NOW)
        yield* seedWatches(tracked("a"), tracked("b"))
        const store = yield* ConnectorStore
        const repo = yield* RelistRepository
        const started = yield* store.startRelistRun(scope)
        const run = Option.getOrThrow(yield* repo.getRun(started.runID))
        const abandoned = { ...run, state: "abandoned" as const, endedAt: NOW, version: run.version + 1 }
        for (const stale of [run.version - 1, run.version + 1]) {
          yield* loses(repo.updateRun(abandoned, stale), `run update at ${stale}`)
        }
        expect(yield* repo.getRun(run.runID)).toEqual(Option.some(run))

        yield* TestClock.adjust(Duration.millis(1))
        const outcome = yield* store.commitSweepCheckpoint(run.runID, {
          page: 1,
          cursor: null,
          receipts: [{ sourceID: "a", digest: "digest-verified" }],
          complete: true
        })
        expect(outcome).toBe("completed")
        const candidate = Option.getOrThrow(yield* repo.getCandidate({ ...scope, sourceID: "b" }))
        expect(candidate.kind).toBe("deleted")
        const decided = { ...candidate, status: "decided" as const, outcome: "delete_local" as const, version: candidate.version + 1 }
        for (const stale of [candidate.version - 1, candidate.version + 1]) {
          yield* loses(repo.updateCandidate(decided, stale), `candidate update at ${stale}`)
        }
        yield* loses(repo.updateCandidate({ ...decided, runID: "another-run" }, candidate.version), "candidate of another run")
        expect(yield* repo.getCandidate({ ...scope, sourceID: "b" })).toEqual(Option.some(candidate))
        expect(yield* repo.updateCandidate(decided, candidate.version)).toBe(true)
        expect(yield* repo.getCandidate({ ...scope, sourceID: "b" })).toEqual(Option.some(decided))
      })))
  })
}
