import { ConnectorStore, type StoreSnapshot, type SyncLease, type SyncProgressCASCurrent } from "@connector-store/core"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Layer, ManagedRuntime, Option } from "effect"
import fc from "fast-check"
import { NOW } from "./support/contract/fixtures.js"
import { failsChangingNothing, onFreshStore, snapshot } from "./support/contract/store.js"
import { adaptersUnderTest } from "./support/stores.js"
import { appending, type InterferingStore, interferingStore, logOf } from "./support/syncstate.js"
import { propertyRuns } from "./support/runs.js"

const adapters = await adaptersUnderTest()

/** Values per adapter in the JSON round-trip property. */
const JSON_RUNS = propertyRuns(100)

const C = "gcal"
const O = "did:owner:1"
const report = { status: "idle", lastSyncedAt: "2026-01-01T00:00:00.000Z", entityCount: 7 } as const

/**
 * `actual` is `expected` exactly: deeply equal with `-0` told from `0`
 * (vitest's equality does), and with the same keys in the same order.
 */
const expectExactly = (actual: unknown, expected: unknown) => {
  expect(actual).toEqual(expected)
  expect(JSON.stringify(actual)).toBe(JSON.stringify(expected))
}

/** Values JSON cannot keep exactly, each refused at the boundary. */
const notJson: ReadonlyArray<readonly [string, unknown]> = [
  ["a function", () => 1],
  ["a BigInt", 10n],
  ["NaN", Number.NaN],
  ["Infinity", Number.POSITIVE_INFINITY],
  ["undefined inside an object", { a: undefined }],
  ["a sparse array", [1, , 3]], // eslint-disable-line no-sparse-arrays
  ["a Date", new Date(0)],
  ["a Map", new Map([["a", 1]])],
  ["a class instance", new (class Cursor { page = 1 })()],
  ["a symbol", Symbol("s")],
  ["a cycle", (() => {
    const node: Record<string, unknown> = {}
    node["self"] = { node }
    return node
  })()]
]

const stateOf = (connectorName = C, ownerDID = O) =>
  Effect.flatMap(ConnectorStore, (s) => Effect.map(s.getSyncState(connectorName, ownerDID), Option.getOrUndefined))

for (const adapter of adapters) {
  const onStore = <A, E>(body: Effect.Effect<A, E, ConnectorStore | StoreSnapshot>) =>
    onFreshStore(adapter, {}, body)

  describe(`sync state on ${adapter.name}`, () => {
    describe("getSyncState, setSyncState, deleteSyncState, listSyncStatesForConnector", () => {
      it.effect("an unknown connector and owner has no state and lists nothing", () =>
        onStore(Effect.gen(function*() {
          const store = yield* ConnectorStore
          expect(yield* store.getSyncState(C, O)).toEqual(Option.none())
          expect(yield* store.listSyncStatesForConnector(C)).toEqual([])
        })))

      it.effect("setSyncState on a new key creates version 0 with a fresh random incarnation, no checkpoint, no lease", () =>
        onStore(Effect.gen(function*() {
          const store = yield* ConnectorStore
          const written = yield* store.setSyncState(C, O, { ...report, error: "rate limited" })
          const other = yield* store.setSyncState(C, "did:owner:2", report)
          expect(written).toEqual({
            ...report,
            error: "rate limited",
            checkpoint: null,
            recovery: null,
            leaseExpiresAt: null,
            version: 0,
            incarnation: expect.any(String)
          })
          expect(written.incarnation).not.toEqual(other.incarnation)
          expect(yield* stateOf()).toEqual(written)
        })))

      it.effect("setSyncState on an existing row rewrites the report and keeps version, incarnation, lease, checkpoint and recovery", () =>
        onStore(Effect.gen(function*() {
          const store = yield* ConnectorStore
          yield* store.setSyncState(C, O, { ...report, status: "syncing", error: "boom" })
          const progressed = yield* store.updateSyncProgress(C, O, appending("a"))
          const claim = yield* store.claimSyncLease(C, O, { now: NOW, leaseMs: 60_000 })
          const written = yield* store.setSyncState(C, O, { status: "error", lastSyncedAt: "later", entityCount: 9 })
          expect(written).toEqual({
            status: "error",
            lastSyncedAt: "later",
            entityCount: 9,
            checkpoint: progressed.checkpoint,
            recovery: progressed.recovery,
            leaseExpiresAt: NOW + 60_000,
            version: 1,
            incarnation: progressed.incarnation
          })
          expect(yield* stateOf()).toEqual(written)
          // The lease is still the claimer's.
          expect(claim.outcome).toBe("claimed")
          if (claim.outcome === "claimed") expect((yield* store.renewSyncLease(claim.lease, { now: NOW, leaseMs: 1 })).outcome).toBe("renewed")
        })))

      it.effect("setSyncState replaces checkpoint and recovery when given them, and ignores version, incarnation and lease copied from a read", () =>
        onStore(Effect.gen(function*() {
          const store = yield* ConnectorStore
          const first = yield* store.updateSyncProgress(C, O, appending("a"))
          const written = yield* store.setSyncState(C, O, {
            ...first,
            ...report,
            checkpoint: { cursor: "page-9" },
            recovery: [1, 2],
            version: 40,
            incarnation: "forged",
            leaseExpiresAt: NOW
          } as never)
          expect(written).toEqual({
            ...report,
            checkpoint: { cursor: "page-9" },
            recovery: [1, 2],
            leaseExpiresAt: null,
            version: 1,
            incarnation: first.incarnation
          })
          expect(yield* stateOf()).toEqual(written)
        })))

      it.effect("deleteSyncState removes the row once; a recreated row starts again at version 0 under a new incarnation", () =>
        onStore(Effect.gen(function*() {
          const store = yield* ConnectorStore
          const old = yield* store.updateSyncProgress(C, O, appending("a"))
          expect(yield* store.deleteSyncState(C, O)).toBe(true)
          expect(yield* store.deleteSyncState(C, O)).toBe(false)
          expect(yield* stateOf()).toBeUndefined()
          const recreated = yield* store.setSyncState(C, O, report)
          expect(recreated.version).toBe(0)
          expect(recreated.checkpoint).toBeNull()
          expect(recreated.incarnation).not.toEqual(old.incarnation)
        })))

      it.effect("listSyncStatesForConnector lists that connector's owners in byte order, and nothing of other connectors", () =>
        onStore(Effect.gen(function*() {
          const store = yield* ConnectorStore
          // Byte (code point) order on every adapter: "B" before "a", U+FF21 before U+1F600.
          const owners = ["did:b", "did:😀", "did:a", "did:\uFF21", "did:B"]
          for (const owner of owners) yield* store.setSyncState(C, owner, { ...report, lastSyncedAt: owner })
          yield* store.setSyncState("jira", "did:a", report)
          const listed = yield* store.listSyncStatesForConnector(C)
          expect(listed.map((entry) => [entry.connectorName, entry.ownerDID, entry.lastSyncedAt])).toEqual(
            ["did:B", "did:a", "did:b", "did:\uFF21", "did:😀"].map((owner) => [C, owner, owner])
          )
          expect(listed[1]).toEqual({ connectorName: C, ownerDID: "did:a", ...(yield* stateOf(C, "did:a")) })
        })))
    })

    describe("updateSyncProgress", () => {
      it.effect("with no row, inserts version 1 under a new incarnation, idle, from a recompute of nothing", () =>
        onStore(Effect.gen(function*() {
          const store = yield* ConnectorStore
          const seen: Array<SyncProgressCASCurrent | null> = []
          const written = yield* store.updateSyncProgress(C, O, appending("a", seen))
          expect(seen).toEqual([null])
          expect(written).toEqual({
            checkpoint: { log: ["a"] },
            recovery: { entries: 1 },
            status: "idle",
            lastSyncedAt: "",
            entityCount: 0,
            leaseExpiresAt: null,
            version: 1,
            incarnation: expect.any(String)
          })
          expect(yield* stateOf()).toEqual(written)
        })))

      it.effect("recomputes from the stored checkpoint, recovery and stamp, bumps the version by one, and leaves status and lease alone", () =>
        onStore(Effect.gen(function*() {
          const store = yield* ConnectorStore
          const set = yield* store.setSyncState(C, O, { ...report, status: "error", error: "e", checkpoint: { log: ["s"] }, recovery: "r" })
          yield* store.claimSyncLease(C, O, { now: NOW, leaseMs: 5 })
          const seen: Array<SyncProgressCASCurrent | null> = []
          const written = yield* store.updateSyncProgress(C, O, appending("a", seen))
          expect(seen).toEqual([{ checkpoint: { log: ["s"] }, recovery: "r", version: 0, incarnation: set.incarnation }])
          expect(written).toEqual({
            ...set,
            checkpoint: { log: ["s", "a"] },
            recovery: { entries: 2 },
            leaseExpiresAt: NOW + 5,
            version: 1
          })
          expect(yield* stateOf()).toEqual(written)
        })))

      it.effect("a recompute that throws fails with SyncProgressRecomputeFailed and writes nothing", () =>
        onStore(Effect.gen(function*() {
          const store = yield* ConnectorStore
          yield* store.setSyncState(C, O, report)
          const error = yield* failsChangingNothing(store.updateSyncProgress(C, O, () => {
            throw new Error("provider said no")
          }))
          expect(error).toMatchObject({ _tag: "SyncProgressRecomputeFailed", connectorName: C, ownerDID: O })
          expect(String(error.message)).toContain("provider said no")
        })))

      it.effect("a recompute returning a Promise, or no recovery, fails with InvalidInput and writes nothing", () =>
        onStore(Effect.gen(function*() {
          const store = yield* ConnectorStore
          yield* store.setSyncState(C, O, report)
          const async = yield* failsChangingNothing(store.updateSyncProgress(C, O, (async () => ({ checkpoint: 1, recovery: 1 })) as never))
          expect(async).toMatchObject({ _tag: "InvalidInput", field: "recompute()" })
          const partial = yield* failsChangingNothing(store.updateSyncProgress(C, O, () => ({ checkpoint: 1 }) as never))
          expect(partial).toMatchObject({ _tag: "InvalidInput", field: "recompute().recovery" })
        })))
    })

    describe("updateSyncProgress against a concurrent writer between its read and its write", () => {
      /** Runs `body` on a fresh interfering store of this adapter. */
      const onRacing = <A, E>(body: (racing: InterferingStore) => Effect.Effect<A, E, ConnectorStore>) =>
        Effect.suspend(() => {
          const racing = interferingStore(adapter)
          return Effect.provide(body(racing), racing.layer)
        })

      it.effect("a lost race to another progress write re-reads and recomputes from the winner's checkpoint", () =>
        onRacing((racing) => Effect.gen(function*() {
          const store = yield* ConnectorStore
          const base = yield* store.updateSyncProgress(C, O, appending("base"))
          const seen: Array<SyncProgressCASCurrent | null> = []
          racing.interfere((other) => other.updateSyncProgress(C, O, appending("other")))
          const written = yield* store.updateSyncProgress(C, O, appending("mine", seen))
          expect(seen.map((current) => [current?.version, logOf(current?.checkpoint)])).toEqual([
            [1, ["base"]],
            [2, ["base", "other"]]
          ])
          expect(written).toMatchObject({ checkpoint: { log: ["base", "other", "mine"] }, version: 3, incarnation: base.incarnation })
          expect(yield* stateOf()).toEqual(written)
        })))

      for (const [label, recreate] of [
        ["setSyncState (version 0 again)", "set"],
        ["a progress insert (version 1 again)", "progress"]
      ] as const) {
        it.effect(`a delete and recreate by ${label} never takes the recompute made from the old incarnation`, () =>
          onRacing((racing) => Effect.gen(function*() {
            const store = yield* ConnectorStore
            const old = recreate === "set"
              ? yield* store.setSyncState(C, O, { ...report, checkpoint: { log: ["old"] } })
              : yield* store.updateSyncProgress(C, O, appending("old"))
            const seen: Array<SyncProgressCASCurrent | null> = []
            racing.interfere((other) =>
              Effect.zipRight(
                other.deleteSyncState(C, O),
                recreate === "set"
                  ? other.setSyncState(C, O, report)
                  : other.updateSyncProgress(C, O, appending("new")) as Effect.Effect<unknown, unknown>
              )
            )
            const written = yield* store.updateSyncProgress(C, O, appending("mine", seen))
            const fresh = seen[1]!
            expect(seen).toHaveLength(2)
            expect(seen[0]).toMatchObject({ version: old.version, incarnation: old.incarnation })
            // Same version, other incarnation: only the incarnation tells the rows apart.
            expect(fresh.version).toBe(old.version)
            expect(fresh.incarnation).not.toEqual(old.incarnation)
            expect(written).toMatchObject({
              checkpoint: { log: recreate === "set" ? ["mine"] : ["new", "mine"] },
              version: old.version + 1,
              incarnation: fresh.incarnation
            })
            expect(yield* stateOf()).toEqual(written)
          })))
      }

      it.effect("an insert that loses to a concurrent insert retries as an update of the winner's row", () =>
        onRacing((racing) => Effect.gen(function*() {
          const store = yield* ConnectorStore
          const seen: Array<SyncProgressCASCurrent | null> = []
          racing.interfere((other) => other.setSyncState(C, O, { ...report, checkpoint: { log: ["theirs"] } }))
          const written = yield* store.updateSyncProgress(C, O, appending("mine", seen))
          expect(seen[0]).toBeNull()
          expect(seen[1]).toMatchObject({ version: 0, checkpoint: { log: ["theirs"] } })
          expect(written).toMatchObject({ ...report, checkpoint: { log: ["theirs", "mine"] }, version: 1, incarnation: seen[1]!.incarnation })
          expect(yield* stateOf()).toEqual(written)
        })))

      it.effect("a row deleted between read and write is created again by the retry, under a new incarnation", () =>
        onRacing((racing) => Effect.gen(function*() {
          const store = yield* ConnectorStore
          const old = yield* store.updateSyncProgress(C, O, appending("old"))
          racing.interfere((other) => other.deleteSyncState(C, O))
          const seen: Array<SyncProgressCASCurrent | null> = []
          const written = yield* store.updateSyncProgress(C, O, appending("mine", seen))
          expect(seen).toEqual([expect.objectContaining({ version: 1 }), null])
          expect(written).toMatchObject({ checkpoint: { log: ["mine"] }, version: 1 })
          expect(written.incarnation).not.toEqual(old.incarnation)
        })))

      it.effect("after maxRetries + 1 lost races it fails with SyncProgressExhausted naming connector and owner; only the others' writes landed", () =>
        onRacing((racing) => Effect.gen(function*() {
          const store = yield* ConnectorStore
          yield* store.updateSyncProgress(C, O, appending("base"))
          racing.interfere(
            (other) => other.updateSyncProgress(C, O, appending("x1")),
            (other) => other.updateSyncProgress(C, O, appending("x2")),
            (other) => other.updateSyncProgress(C, O, appending("x3"))
          )
          const seen: Array<SyncProgressCASCurrent | null> = []
          const error = yield* Effect.flip(store.updateSyncProgress(C, O, appending("mine", seen), { maxRetries: 2 }))
          expect(error).toMatchObject({ _tag: "SyncProgressExhausted", connectorName: C, ownerDID: O, attempts: 3 })
          expect(error.message).toContain(C)
          expect(error.message).toContain(O)
          expect(seen).toHaveLength(3)
          expect(racing.pending()).toBe(0)
          expect(yield* stateOf()).toMatchObject({ checkpoint: { log: ["base", "x1", "x2", "x3"] }, version: 4 })
        })))

      it.effect("maxRetries 0 allows exactly one attempt", () =>
        onRacing((racing) => Effect.gen(function*() {
          const store = yield* ConnectorStore
          racing.interfere((other) => other.setSyncState(C, O, report))
          const error = yield* Effect.flip(store.updateSyncProgress(C, O, appending("mine"), { maxRetries: 0 }))
          expect(error).toMatchObject({ _tag: "SyncProgressExhausted", attempts: 1 })
          expect(yield* stateOf()).toMatchObject({ checkpoint: null, version: 0 })
        })))
    })

    describe("a caller ported from the original store", () => {
      const onRacing = <A, E>(body: (racing: InterferingStore) => Effect.Effect<A, E, ConnectorStore | StoreSnapshot>) =>
        Effect.suspend(() => {
          const racing = interferingStore(adapter)
          return Effect.provide(body(racing), racing.layer)
        })
      const INT4_MAX = 2_147_483_647

      it.effect("a progress write that creates the row takes only the progress fields: keys, incarnation, lease, status or version in the result are refused, nothing written", () =>
        onStore(Effect.gen(function*() {
          const store = yield* ConnectorStore
          const forged = {
            checkpoint: 1,
            recovery: null,
            connectorName: "c2",
            ownerDID: "elsewhere",
            incarnation: "chosen",
            status: "bogus",
            leaseToken: "t",
            leaseExpiresAt: NOW + 60_000,
            version: 9
          }
          const error = yield* failsChangingNothing(store.updateSyncProgress(C, O, () => forged as never))
          expect(error).toMatchObject({ _tag: "InvalidInput", method: "updateSyncProgress", field: expect.stringMatching(/^recompute\(\)\./) })
          for (const [field, value] of Object.entries(forged).filter(([name]) => name !== "checkpoint" && name !== "recovery")) {
            const one = yield* failsChangingNothing(store.updateSyncProgress(C, O, () => ({ checkpoint: 1, recovery: null, [field]: value }) as never))
            expect(one, field).toMatchObject({ _tag: "InvalidInput", field: `recompute().${field}` })
          }
          expect(yield* stateOf("c2", "elsewhere")).toBeUndefined()
          expect(yield* stateOf()).toBeUndefined()
          // What a ported caller spreads (the recompute's argument, the key) is a copy, and lands.
          yield* store.updateSyncProgress(C, O, (current) => ({ ...current, connectorName: C, ownerDID: O, checkpoint: 1, recovery: null }))
          const stored = (yield* stateOf())!
          const copied = yield* store.updateSyncProgress(C, O, (current) => ({ ...current!, checkpoint: 2 }))
          expect(copied).toMatchObject({ checkpoint: 2, version: 2, incarnation: stored.incarnation, status: "idle" })
          const stale = yield* failsChangingNothing(store.updateSyncProgress(C, O, (current) => ({ ...current!, version: 0, checkpoint: 3 })))
          expect(stale).toMatchObject({ _tag: "InvalidInput", field: "recompute().version" })
        })))

      it.effect("updateSyncProgress resolves with the row as written when a setSyncState lands between its read and its write", () =>
        onRacing((racing) => Effect.gen(function*() {
          const store = yield* ConnectorStore
          yield* store.setSyncState(C, O, { ...report, status: "syncing" })
          racing.interfere((other) => other.setSyncState(C, O, { status: "error", lastSyncedAt: "later", entityCount: 99, error: "quota" }))
          const written = yield* store.updateSyncProgress(C, O, appending("mine"))
          expect(racing.pending()).toBe(0)
          expect(written).toMatchObject({ status: "error", lastSyncedAt: "later", entityCount: 99, error: "quota", checkpoint: { log: ["mine"] } })
          expect(yield* stateOf()).toEqual(written)
        })))

      it.effect("the recompute gets null for no row, and the list answers each state's fields flat beside connectorName and ownerDID", () =>
        onStore(Effect.gen(function*() {
          const store = yield* ConnectorStore
          const seen: Array<SyncProgressCASCurrent | null> = []
          yield* store.updateSyncProgress(C, O, appending("a", seen))
          expect(seen).toEqual([null])
          const state = (yield* stateOf())!
          expect(yield* store.listSyncStatesForConnector(C)).toEqual([{ connectorName: C, ownerDID: O, ...state }])
        })))

      it.effect("a progress result's lastSyncedAt, entityCount and error are written, on insert and on update; absent ones keep what is stored", () =>
        onStore(Effect.gen(function*() {
          const store = yield* ConnectorStore
          const inserted = yield* store.updateSyncProgress(C, O, () => ({ checkpoint: 1, recovery: null, lastSyncedAt: "t1", entityCount: 5, error: "partial" }) as never)
          expect(inserted).toMatchObject({ status: "idle", lastSyncedAt: "t1", entityCount: 5, error: "partial", version: 1 })
          expect(yield* stateOf()).toEqual(inserted)
          const counted = yield* store.updateSyncProgress(C, O, () => ({ checkpoint: 2, recovery: null, entityCount: 6 }) as never)
          expect(counted).toMatchObject({ lastSyncedAt: "t1", entityCount: 6, error: "partial", version: 2 })
          const cleared = yield* store.updateSyncProgress(C, O, () => ({ checkpoint: 3, recovery: null, error: null, lastSyncedAt: "t3" }) as never)
          expect(cleared).toMatchObject({ lastSyncedAt: "t3", entityCount: 6, version: 3 })
          expect(cleared.error).toBeUndefined()
          expect(yield* stateOf()).toEqual(cleared)
          for (const [field, value] of [["entityCount", -1], ["entityCount", 1.5], ["lastSyncedAt", 5], ["error", 5]] as const) {
            const error = yield* failsChangingNothing(store.updateSyncProgress(C, O, () => ({ checkpoint: 4, recovery: null, [field]: value }) as never))
            expect(error, `${field} ${value}`).toMatchObject({ _tag: "InvalidInput", field: `recompute().${field}` })
          }
        })))

      it.effect("entityCount is one range on every adapter: up to 2^31 - 1 kept, 2^31 refused naming the field, nothing written", () =>
        onStore(Effect.gen(function*() {
          const store = yield* ConnectorStore
          expect((yield* store.setSyncState(C, O, { ...report, entityCount: INT4_MAX })).entityCount).toBe(INT4_MAX)
          expect((yield* stateOf())!.entityCount).toBe(INT4_MAX)
          const set = yield* failsChangingNothing(store.setSyncState(C, O, { ...report, entityCount: INT4_MAX + 1 }))
          expect(set).toMatchObject({ _tag: "InvalidInput", field: "state.entityCount" })
          const progress = yield* failsChangingNothing(
            store.updateSyncProgress(C, O, () => ({ checkpoint: 1, recovery: null, entityCount: INT4_MAX + 1 }) as never)
          )
          expect(progress).toMatchObject({ _tag: "InvalidInput", field: "recompute().entityCount" })
        })))

      describe("fenced by the sync lease token", () => {
        it.effect("a holder whose lease was taken over has its progress and report refused with SyncLeaseLost, changing nothing; the new holder's land", () =>
          onStore(Effect.gen(function*() {
            const store = yield* ConnectorStore
            const first = yield* store.claimSyncLease(C, O, { now: NOW, leaseMs: 1_000 })
            if (first.outcome !== "claimed") return expect.unreachable("first claim")
            yield* store.updateSyncProgress(C, O, appending("first"), { leaseToken: first.lease.token } as never)
            const second = yield* store.claimSyncLease(C, O, { now: NOW + 1_000, leaseMs: 1_000 })
            if (second.outcome !== "claimed") return expect.unreachable("takeover")
            let recomputes = 0
            const progress = yield* failsChangingNothing(store.updateSyncProgress(C, O, (current) => {
              recomputes++
              return appending("stale")(current)
            }, { leaseToken: first.lease.token } as never))
            expect(progress).toMatchObject({ _tag: "SyncLeaseLost", method: "updateSyncProgress", connectorName: C, ownerDID: O })
            expect(recomputes).toBe(0)
            const set = yield* failsChangingNothing((store.setSyncState as (...args: ReadonlyArray<unknown>) => Effect.Effect<unknown, unknown>)(
              C, O, { ...report, status: "error" }, { leaseToken: first.lease.token }
            ))
            expect(set).toMatchObject({ _tag: "SyncLeaseLost", method: "setSyncState", connectorName: C, ownerDID: O })
            const landed = yield* store.updateSyncProgress(C, O, appending("second"), { leaseToken: second.lease.token } as never)
            expect(logOf(landed.checkpoint)).toEqual(["first", "second"])
            yield* (store.setSyncState as (...args: ReadonlyArray<unknown>) => Effect.Effect<unknown, unknown>)(
              C, O, { ...report, status: "idle" }, { leaseToken: second.lease.token }
            )
            // Without a token, the original's behaviour: no fence.
            const unfenced = yield* store.updateSyncProgress(C, O, appending("unfenced"))
            expect(logOf(unfenced.checkpoint)).toEqual(["first", "second", "unfenced"])
          })))

        it.effect("a takeover landing between a fenced progress write's read and its write refuses it; the takeover's state stays", () =>
          onRacing((racing) => Effect.gen(function*() {
            const store = yield* ConnectorStore
            const first = yield* store.claimSyncLease(C, O, { now: NOW, leaseMs: 1_000 })
            if (first.outcome !== "claimed") return expect.unreachable("first claim")
            racing.interfere((other) => other.claimSyncLease(C, O, { now: NOW + 1_000, leaseMs: 1_000 }))
            const error = yield* Effect.flip(store.updateSyncProgress(C, O, appending("stale"), { leaseToken: first.lease.token } as never))
            expect(error).toMatchObject({ _tag: "SyncLeaseLost" })
            expect(yield* stateOf()).toMatchObject({ checkpoint: null, version: 0, leaseExpiresAt: NOW + 2_000 })
          })))

        it.effect("a released lease or a deleted row refuses a fenced write; a lapsed lease nobody took over still lets its holder write", () =>
          onStore(Effect.gen(function*() {
            const store = yield* ConnectorStore
            const claim = yield* store.claimSyncLease(C, O, { now: NOW, leaseMs: 1_000 })
            if (claim.outcome !== "claimed") return expect.unreachable("claim")
            const fence = { leaseToken: claim.lease.token } as never
            // Lapsed (the caller's clock is past the expiry) but not taken over: still the holder's.
            expect((yield* store.updateSyncProgress(C, O, appending("late"), fence)).version).toBe(1)
            expect(yield* store.releaseSyncLease(claim.lease)).toBe(true)
            expect(yield* failsChangingNothing(store.updateSyncProgress(C, O, appending("x"), fence))).toMatchObject({ _tag: "SyncLeaseLost" })
            expect(yield* store.deleteSyncState(C, O)).toBe(true)
            expect(yield* failsChangingNothing(store.updateSyncProgress(C, O, appending("x"), fence))).toMatchObject({ _tag: "SyncLeaseLost" })
            const set = yield* failsChangingNothing((store.setSyncState as (...args: ReadonlyArray<unknown>) => Effect.Effect<unknown, unknown>)(
              C, O, report, { leaseToken: claim.lease.token }
            ))
            expect(set).toMatchObject({ _tag: "SyncLeaseLost" })
          })))
      })
    })

    describe("JSON columns", () => {
      const exactly: ReadonlyArray<readonly [string, unknown]> = [
        ["negative zero", -0],
        ["negative zero deep inside", { a: [0, -0, { b: -0 }] }],
        ["the largest and smallest doubles", [Number.MAX_VALUE, Number.MIN_VALUE, -Number.MAX_VALUE, 2 ** 53 + 2]],
        ["strings with NUL, lone surrogates, emoji and quotes", ["\u0000", "\ud800", "\udfff x", "😀", "\"'\\", ""]],
        // Built by JSON.parse, which makes "__proto__" an own key.
        ["keys that look special", JSON.parse(`{"__proto__": 1, "constructor": {"prototype": null}, "": "", "1": 1, "a.b": true}`)],
        ["a bare string", "s"],
        ["a bare boolean", false],
        ["empty containers", { a: {}, b: [], c: [[]] }]
      ]
      for (const [label, value] of exactly) {
        it.effect(`${label}: round-trips exactly through progress and setSyncState`, () =>
          onStore(Effect.gen(function*() {
            const store = yield* ConnectorStore
            yield* store.updateSyncProgress(C, O, () => ({ checkpoint: value, recovery: [value] }))
            const progressed = yield* stateOf()
            expectExactly(progressed?.checkpoint, value)
            expectExactly(progressed?.recovery, [value])
            yield* store.setSyncState(C, "did:other", { ...report, checkpoint: value, recovery: value })
            expectExactly((yield* stateOf(C, "did:other"))?.recovery, value)
          })))
      }

      it("any JSON value round-trips exactly (property)", async () => {
        const runtime = ManagedRuntime.make(adapter.layer({}))
        try {
          let n = 0
          await fc.assert(
            fc.asyncProperty(fc.jsonValue({ maxDepth: 4 }), fc.jsonValue({ maxDepth: 2 }), async (checkpoint, recovery) => {
              const owner = `did:json:${n++}`
              const read = await runtime.runPromise(Effect.gen(function*() {
                const store = yield* ConnectorStore
                yield* store.updateSyncProgress(C, owner, () => ({ checkpoint, recovery }))
                return yield* stateOf(C, owner)
              }))
              expectExactly(read?.checkpoint, checkpoint)
              expectExactly(read?.recovery, recovery)
            }),
            { numRuns: JSON_RUNS }
          )
        } finally {
          await runtime.dispose()
        }
      })
    })

    // One store for all the refusals: each proves it changed nothing.
    layer(Layer.suspend(() => adapter.layer({})))("bad input: a typed error naming the field, and nothing read or written", (it) => {
      const lease: SyncLease = { connectorName: C, ownerDID: "did:leased", token: "a-token", expiresAt: NOW + 1_000 }
      const seeded = Effect.gen(function*() {
        const store = yield* ConnectorStore
        if (Option.isNone(yield* store.getSyncState(C, O))) {
          yield* store.setSyncState(C, O, { ...report, checkpoint: { log: ["seed"] } })
          yield* store.claimSyncLease(C, lease.ownerDID, { now: NOW, leaseMs: 1_000 })
        }
        return { store, lease }
      })
      type Case = readonly [string, string, (s: ConnectorStore["Type"], lease: SyncLease) => Effect.Effect<unknown, unknown>]
      const cases: ReadonlyArray<Case> = [
        ["getSyncState with an empty connector name", "connectorName", (s) => s.getSyncState("", O)],
        ["getSyncState with a non-string owner", "ownerDID", (s) => s.getSyncState(C, 5 as never)],
        ["setSyncState with an empty owner", "ownerDID", (s) => s.setSyncState(C, "", report)],
        ["setSyncState with an unknown status", "state.status", (s) => s.setSyncState(C, O, { ...report, status: "done" as never })],
        ["setSyncState with a NaN entity count", "state.entityCount", (s) => s.setSyncState(C, O, { ...report, entityCount: Number.NaN })],
        ["setSyncState with a negative entity count", "state.entityCount", (s) => s.setSyncState(C, O, { ...report, entityCount: -1 })],
        ["setSyncState with a non-string lastSyncedAt", "state.lastSyncedAt", (s) => s.setSyncState(C, O, { ...report, lastSyncedAt: 5 as never })],
        ["setSyncState with a numeric error", "state.error", (s) => s.setSyncState(C, O, { ...report, error: 5 as never })],
        ["setSyncState with a function checkpoint", "state.checkpoint", (s) => s.setSyncState(C, O, { ...report, checkpoint: () => 1 })],
        ["setSyncState with a NaN recovery", "state.recovery", (s) => s.setSyncState(C, O, { ...report, recovery: [Number.NaN] })],
        ["setSyncState with no state", "state", (s) => s.setSyncState(C, O, undefined as never)],
        ["updateSyncProgress with an empty connector name", "connectorName", (s) => s.updateSyncProgress("", O, appending("x"))],
        ["updateSyncProgress without a recompute function", "recompute", (s) => s.updateSyncProgress(C, O, { checkpoint: 1 } as never)],
        ["updateSyncProgress with negative maxRetries", "options.maxRetries", (s) => s.updateSyncProgress(C, O, appending("x"), { maxRetries: -1 })],
        ["updateSyncProgress with fractional maxRetries", "options.maxRetries", (s) => s.updateSyncProgress(C, O, appending("x"), { maxRetries: 1.5 })],
        ["deleteSyncState with an empty owner", "ownerDID", (s) => s.deleteSyncState(C, "")],
        ["listSyncStatesForConnector with an empty name", "connectorName", (s) => s.listSyncStatesForConnector("")],
        ["claimSyncLease with a NaN now", "options.now", (s) => s.claimSyncLease(C, O, { now: Number.NaN, leaseMs: 1 })],
        ["claimSyncLease with a negative now", "options.now", (s) => s.claimSyncLease(C, O, { now: -1, leaseMs: 1 })],
        ["claimSyncLease with a zero lease", "options.leaseMs", (s) => s.claimSyncLease(C, O, { now: NOW, leaseMs: 0 })],
        ["claimSyncLease with a lease over a day", "options.leaseMs", (s) => s.claimSyncLease(C, O, { now: NOW, leaseMs: 86_400_001 })],
        ["claimSyncLease with an expiry past the safe integers", "options.leaseMs", (s) => s.claimSyncLease(C, O, { now: Number.MAX_SAFE_INTEGER, leaseMs: 1 })],
        ["claimSyncLease with an empty owner", "ownerDID", (s) => s.claimSyncLease(C, "", { now: NOW, leaseMs: 1 })],
        ["renewSyncLease with an empty token", "lease.token", (s, lease) => s.renewSyncLease({ ...lease, token: "" }, { now: NOW, leaseMs: 1 })],
        ["renewSyncLease with a NaN now", "options.now", (s, lease) => s.renewSyncLease(lease, { now: Number.NaN, leaseMs: 1 })],
        ["releaseSyncLease with no lease", "lease", (s) => s.releaseSyncLease(undefined as never)],
        ["releaseSyncLease with an empty owner", "lease.ownerDID", (s, lease) => s.releaseSyncLease({ ...lease, ownerDID: "" })],
        ...notJson.map(([label, value]): Case => [
          `updateSyncProgress whose recompute returns ${label} inside the checkpoint`,
          "recompute().checkpoint",
          (s) => s.updateSyncProgress(C, O, () => ({ checkpoint: { deep: [value] }, recovery: null }))
        ])
      ]
      for (const [label, field, call] of cases) {
        it.effect(label, () =>
          Effect.gen(function*() {
            const { lease, store } = yield* seeded
            expect((yield* snapshot)["sync_state"]).toHaveLength(2)
            const error = yield* failsChangingNothing(call(store, lease))
            expect(error).toMatchObject({ _tag: "InvalidInput", field })
          }))
      }
    })
  })
}

