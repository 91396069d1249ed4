import { ConnectorStore, type ProjectionWatch } from "@connector-store/core"
import { describe, expect, it } from "@effect/vitest"
import * as Sql from "@connector-store/sql-adapter"
import { Effect, Option } from "effect"
import { identityOf, NOW, watchRow } from "./support/contract/fixtures.js"
import { onFreshStore, seedWatches, storedWatch } from "./support/contract/store.js"
import { Winners } from "./support/contract/winners.js"
import { freshSqlitePath, pgAvailable } from "./support/databases.js"
import { runProcess } from "./support/processes.js"
import { postgresAdapter, type StoreServices } from "./support/stores.js"

/** How many callers race at once; the pool has 8 connections, so they really overlap on the server. */
const RACERS = 40

const id = identityOf()

/** Deterministic shuffle, so racers do not start in the order their inputs were made. */
const shuffled = <A>(items: ReadonlyArray<A>): ReadonlyArray<A> => {
  const out = [...items]
  let seed = 7
  for (let i = out.length - 1; i > 0; i--) {
    seed = (seed * 48_271) % 2_147_483_647
    const j = seed % (i + 1)
    ;[out[i], out[j]] = [out[j]!, out[i]!]
  }
  return out
}

const race = <A, E, R>(calls: ReadonlyArray<Effect.Effect<A, E, R>>) => Effect.all(calls, { concurrency: "unbounded" })

/** Postgres, when the server answers (databases.ts warns loudly when it does not; CI requires it). */
const postgres = pgAvailable ? await postgresAdapter() : undefined

describe.runIf(postgres !== undefined)("races on one watch, on Postgres with real concurrent connections", () => {
  const onStore = <A, E>(winners: Winners, body: Effect.Effect<A, E, StoreServices>) =>
    onFreshStore(postgres!, winners.single(), body)

  it.live("of many claims in one window exactly one wins", () =>
    onStore(new Winners(), Effect.gen(function*() {
      const row = watchRow({ nextAttemptAt: NOW - 1 })
      yield* seedWatches(row)
      const store = yield* ConnectorStore
      const won = yield* race(Array.from({ length: RACERS }, () =>
        store.claimWatchAttempt(id, { generation: 1, until: NOW + 1_000, now: NOW })))
      expect(won.filter(Boolean).length).toBe(1)
      expect(yield* storedWatch(id)).toMatchObject({ claimedUntil: NOW + 1_000, version: row.version + 1 })
    })))

  it.live("claims racing across many windows never overlap", () =>
    onStore(new Winners(), Effect.gen(function*() {
      const row = watchRow({ nextAttemptAt: NOW - 1 })
      yield* seedWatches(row)
      const store = yield* ConnectorStore
      // Claimers see different clocks; each claim lasts 1 s, and windows start every 100 ms.
      const claims = shuffled(Array.from({ length: RACERS }, (_, i) => ({ now: NOW + i * 100, until: NOW + i * 100 + 1_000 })))
      const won = yield* race(claims.map((claim) =>
        Effect.map(store.claimWatchAttempt(id, { generation: 1, ...claim }), (ok) => ok ? [claim] : [])))
      const winners = won.flat().sort((a, b) => a.now - b.now)
      expect(winners.length).toBeGreaterThan(0)
      for (let i = 1; i < winners.length; i++) expect(winners[i]!.now).toBeGreaterThanOrEqual(winners[i - 1]!.until)
      expect((yield* storedWatch(id)).version).toBe(row.version + winners.length)
    })))

  it.live("concurrent ingress of one new winner opens the generation once", () =>
    onStore(new Winners({ "doc-1": "w-new" }), Effect.gen(function*() {
      const row = watchRow({ verificationStatus: "verified", nextAttemptAt: null })
      yield* seedWatches(row)
      const store = yield* ConnectorStore
      const outcomes = yield* race(Array.from({ length: RACERS }, () =>
        store.armWatch(id, "ingress", { dueAt: NOW, triggeringWinner: "w-new" })))
      expect(outcomes.filter((o) => o === "opened").length).toBe(1)
      expect(outcomes.filter((o) => o === "noop").length).toBe(RACERS - 1)
      expect(yield* storedWatch(id)).toMatchObject({
        repairGeneration: row.repairGeneration + 1,
        observedWinnerDigest: "w-new",
        version: row.version + 1
      })
    })))

  it.live("concurrent manual arms each open a generation of their own", () =>
    onStore(new Winners({ "doc-1": "w" }), Effect.gen(function*() {
      const row = watchRow()
      yield* seedWatches(row)
      const store = yield* ConnectorStore
      const outcomes = yield* race(Array.from({ length: RACERS }, (_, i) => store.armWatch(id, "manual", { dueAt: NOW + i })))
      expect(outcomes.every((o) => o === "opened")).toBe(true)
      expect(yield* storedWatch(id)).toMatchObject({
        repairGeneration: row.repairGeneration + RACERS,
        version: row.version + RACERS
      })
    })))

  for (const [label, fetchedDigest, outcome] of [["matching", "w", "verified"], ["mismatching", "x", "pending"]] as const) {
    it.live(`of many verifiers holding one claim, exactly one ${label} result is recorded`, () =>
      onStore(new Winners({ "doc-1": "w" }), Effect.gen(function*() {
        const row = watchRow({ claimedUntil: NOW + 1_000 })
        yield* seedWatches(row)
        const store = yield* ConnectorStore
        const outcomes = yield* race(Array.from({ length: RACERS }, () =>
          store.recordVerification(id, { generation: 1, claimedUntil: NOW + 1_000, fetchedDigest, maxAttempts: 99, dueAt: NOW })))
        expect(outcomes.filter((o) => o === outcome).length).toBe(1)
        expect(outcomes.filter((o) => o === "stale-claim").length).toBe(RACERS - 1)
        expect((yield* storedWatch(id)).version).toBe(row.version + 1)
      })))
  }

  it.live("a storm of arms, claims and verifications loses no update: every write builds on the latest row", () => {
    const winners = new Winners({ "doc-1": "w-0" })
    return onStore(winners, Effect.gen(function*() {
      const row = watchRow({ nextAttemptAt: NOW - 1, verificationAttempts: 0 })
      yield* seedWatches(row)
      const store = yield* ConnectorStore
      /** Reads the row as a racer would before acting on it. */
      const current = Effect.map(store.getWatch(id), Option.getOrThrow)
      const act = (i: number): Effect.Effect<Tally, unknown> => {
        switch (i % 8) {
          case 0:
            return Effect.map(store.armWatch(id, "manual", { dueAt: NOW - 1 }), (o) => tally("manual", o !== "noop", o === "opened"))
          case 1:
            return Effect.suspend(() => {
              winners.set("doc-1", `w-${i}`)
              return Effect.map(
                store.armWatch(id, "ingress", { dueAt: NOW - 1, triggeringWinner: `w-${i}` }),
                (o) => tally("ingress", o !== "noop", o === "opened")
              )
            })
          case 2:
          case 3:
          case 4:
            return Effect.flatMap(current, (seen) =>
              Effect.map(
                store.claimWatchAttempt(id, { generation: seen.repairGeneration, until: NOW + i + 20, now: NOW + i }),
                (won) => tally("claim", won, false)
              ))
          default:
            return Effect.flatMap(current, (seen: ProjectionWatch) =>
              Effect.map(
                store.recordVerification(id, {
                  generation: seen.repairGeneration,
                  claimedUntil: seen.claimedUntil,
                  fetchedDigest: i % 3 === 0 ? winners.get("doc-1") : "stale",
                  maxAttempts: 3,
                  dueAt: NOW - 1
                }),
                (o) => tally("verify", o !== "stale-generation" && o !== "stale-claim", false)
              ))
        }
      }
      // As many racers in flight as the pool has connections: each acts on a recent read, and they all overlap.
      const results = yield* Effect.all(shuffled(Array.from({ length: 4 * RACERS }, (_, i) => act(i))), { concurrency: 8 })
      const writes = results.filter((r) => r.wrote).length
      const opened = results.filter((r) => r.opened).length
      const final = yield* storedWatch(id)
      expect(final.version).toBe(row.version + writes)
      expect(final.repairGeneration).toBe(row.repairGeneration + opened)
      // Manual arms always open; the other kinds must have landed writes too, or the race proved little.
      expect(opened).toBeGreaterThanOrEqual(RACERS / 2)
      for (const kind of ["claim", "verify"] as const) {
        expect(results.some((r) => r.kind === kind && r.wrote), kind).toBe(true)
      }
    }))
  })
})

describe("races on one watch in one SQLite file, from separate processes", () => {
  it("contending processes, each with its own connection, never lose an update", async () => {
    const file = freshSqlitePath()
    const row = watchRow({ nextAttemptAt: 0 })
    const onFile = <A, E>(effect: Effect.Effect<A, E, StoreServices>) => Effect.runPromise(Effect.provide(effect, Sql.layer({ url: file })))
    await onFile(seedWatches(row))
    const outputs = await Promise.all(Array.from({ length: SQLITE_CONTENDERS }, (_, k) =>
      runProcess("watch-contender", [file, String(SQLITE_CONTENDERS), String(k), "40", JSON.stringify(id)])))
    const tallies = outputs.map((output) => JSON.parse(output) as ContenderTally)
    const final = await onFile(storedWatch(id))
    const sum = (pick: (t: ContenderTally) => number) => tallies.reduce((total, t) => total + pick(t), 0)
    expect(final.version).toBe(row.version + sum((t) => t.writes))
    expect(final.repairGeneration).toBe(row.repairGeneration + sum((t) => t.opened))
    // The contenders really ran at the same time, and every kind of write landed somewhere.
    for (const a of tallies) for (const b of tallies) expect(a.startedAt).toBeLessThan(b.endedAt)
    for (const kind of ["manual", "ingress", "claim", "verify"] as const) expect(sum((t) => t.kinds[kind]), kind).toBeGreaterThan(0)
  })
})

/** What a contender process reports. */
interface ContenderTally {
  readonly writes: number
  readonly opened: number
  readonly kinds: Readonly<Record<"manual" | "ingress" | "claim" | "verify", number>>
  readonly startedAt: number
  readonly endedAt: number
}

/** How many OS processes contend for one SQLite file. */
const SQLITE_CONTENDERS = 3

/** What one racer did: its kind, whether it wrote the row, and whether it opened a generation. */
interface Tally {
  readonly kind: "manual" | "ingress" | "claim" | "verify"
  readonly wrote: boolean
  readonly opened: boolean
}

const tally = (kind: Tally["kind"], wrote: boolean, opened: boolean): Tally => ({ kind, wrote, opened })
