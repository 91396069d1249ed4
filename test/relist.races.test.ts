import {
  ConnectorStore,
  type ProjectionWatch,
  type RelistScope
} from "@connector-store/core"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Option } from "effect"
import { NOW, watchRow } from "./support/contract/fixtures.js"
import { at, onFreshStore, seedWatches } from "./support/contract/store.js"
import { adaptersUnderTest, type StoreServices } from "./support/stores.js"

/** The documented number of failed applies that gives a candidate up, stated on its own (not read from the code). */
const SWEEP_APPLY_ATTEMPTS = 5

// Real concurrent fibers. On Postgres each holds its own connection, so the
// races are real; SQLite and memory serialize them, and must give the same
// guarantees.
const adapters = await adaptersUnderTest()

const scope: RelistScope = { ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1" }
const tracked = (sourceID: string): ProjectionWatch =>
  watchRow({ ...scope, sourceID, documentID: `doc-${sourceID}`, verifiedStateDigest: "d1", updatedAt: NOW - 1_000 })

const together = <A, E>(effects: ReadonlyArray<Effect.Effect<A, E, StoreServices>>) =>
  Effect.all(effects, { concurrency: "unbounded" })

const count = <A>(values: ReadonlyArray<A>, value: A) => values.filter((v) => v === value).length

for (const adapter of adapters) {
  const onStore = <A, E>(body: Effect.Effect<A, E, StoreServices>) =>
    onFreshStore(adapter, {}, Effect.zipRight(at(NOW), body))

  describe(`relist races on ${adapter.name}`, () => {
    it.effect("concurrent starts of one scope leave exactly one current run; every other is superseded", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const starters = 16
        const started = yield* together(Array.from({ length: starters }, () => store.startRelistRun(scope)))
        const current = Option.getOrThrow(yield* store.getSweepCheckpoint(scope))
        const states = yield* Effect.forEach(started, (run) =>
          Effect.map(store.getRelistRun(run.runID), (found) => Option.getOrThrow(found).state))
        expect(new Set(started.map((run) => run.runID)).size).toBe(starters)
        expect(count(states, "started")).toBe(1)
        expect(count(states, "superseded")).toBe(starters - 1)
        expect(started.map((run) => run.runID)).toContain(current.runID)
      })))

    it.effect("runners racing for the same page: exactly one commits it, the others store nothing", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const run = yield* store.startRelistRun(scope)
        const outcomes = yield* together(Array.from({ length: 6 }, (_, runner) =>
          Effect.map(
            store.commitSweepCheckpoint(run.runID, {
              page: 1,
              cursor: `cursor-of-${runner}`,
              receipts: [{ sourceID: `seen-by-${runner}`, digest: "d" }]
            }),
            (outcome) => [runner, outcome] as const
          )))
        const winners = outcomes.filter(([, outcome]) => outcome === "committed")
        expect(winners.length).toBe(1)
        expect(count(outcomes.map(([, outcome]) => outcome), "stale-page")).toBe(5)
        const winner = winners[0]![0]
        expect(Option.getOrThrow(yield* store.getSweepCheckpoint(scope)))
          .toMatchObject({ cursor: `cursor-of-${winner}`, pagesCommitted: 1 })
        expect((yield* store.listSweepReceipts(run.runID, { limit: 10 })).map((r) => r.sourceID)).toEqual([`seen-by-${winner}`])
      })))

    it.effect("a completion racing a new start never leaves candidates behind a superseded run", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        yield* seedWatches(tracked("a"), tracked("b"))
        for (let round = 0; round < 4; round++) {
          const run = yield* store.startRelistRun(scope)
          const [completion] = yield* together<unknown, unknown>([
            store.commitSweepCheckpoint(run.runID, { page: 1, cursor: null, receipts: [], complete: true }),
            Effect.asVoid(store.startRelistRun(scope))
          ])
          expect(["completed", "stale-run"]).toContain(completion)
          const listed = yield* Effect.either(store.listSweepCandidates(run.runID, { limit: 10 }))
          expect(Either.isLeft(listed) && listed.left._tag).toBe("RelistRunNotComplete")
          expect(Option.getOrThrow(yield* store.getRelistRun(run.runID)).state).toBe("superseded")
        }
      })))

    it.effect(`concurrent failed applies stop counting at ${SWEEP_APPLY_ATTEMPTS}: given up exactly once`, () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        yield* seedWatches(tracked("gone"))
        const run = yield* store.startRelistRun(scope)
        yield* store.commitSweepCheckpoint(run.runID, { page: 1, cursor: null, receipts: [], complete: true })
        const ref = { runID: run.runID, sourceID: "gone" }
        yield* store.recordSweepOutcome(ref, "delete_local")
        const outcomes = yield* together(Array.from({ length: 12 }, (_, i) =>
          store.recordSweepApplyFailure(ref, { kind: "network", message: `failure ${i}` })))
        expect(count(outcomes, "retry")).toBe(SWEEP_APPLY_ATTEMPTS - 1)
        expect(count(outcomes, "given-up")).toBe(12 - (SWEEP_APPLY_ATTEMPTS - 1))
        expect(Option.getOrThrow(yield* store.getSweepCandidate({ ...scope, sourceID: "gone" })))
          .toMatchObject({ status: "given_up", applyAttempts: SWEEP_APPLY_ATTEMPTS })
      })))

    it.effect("an apply racing failures is either recorded before the give-up or refused after it", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        yield* seedWatches(tracked("gone"))
        const run = yield* store.startRelistRun(scope)
        yield* store.commitSweepCheckpoint(run.runID, { page: 1, cursor: null, receipts: [], complete: true })
        const ref = { runID: run.runID, sourceID: "gone" }
        yield* store.recordSweepOutcome(ref, "delete_local")
        const [applied, ...failures] = yield* together<string, unknown>([
          store.markSweepCandidateApplied(ref),
          ...Array.from({ length: 8 }, () => store.recordSweepApplyFailure(ref, { kind: "network", message: "down" }))
        ])
        const row = Option.getOrThrow(yield* store.getSweepCandidate({ ...scope, sourceID: "gone" }))
        if (applied === "applied") {
          expect(row.status).toBe("applied")
          expect(row.applyAttempts).toBeLessThan(SWEEP_APPLY_ATTEMPTS)
          expect(failures).toContain("applied")
        } else {
          expect(applied).toBe("given-up")
          expect(row).toMatchObject({ status: "given_up", applyAttempts: SWEEP_APPLY_ATTEMPTS })
        }
      })))

    it.effect("concurrent retention passes delete each ended run once", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        for (let i = 0; i < 10; i++) {
          const run = yield* store.startRelistRun(scope)
          yield* store.recordRelistReceipt(run.runID, [{ sourceID: `s${i}`, digest: null }])
        }
        const collected = yield* together(Array.from({ length: 4 }, () => store.collectRelistRuns({ before: NOW + 1, limit: 3 })))
        const more = yield* store.collectRelistRuns({ before: NOW + 1, limit: 100 })
        expect(collected.reduce((a, b) => a + b, 0) + more).toBe(9)
        expect(Option.isSome(yield* store.getSweepCheckpoint(scope))).toBe(true)
      })))
  })
}
