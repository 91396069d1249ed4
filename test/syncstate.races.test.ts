import { ConnectorStore, type SyncState } from "@connector-store/core"
import * as Sql from "@connector-store/sql-adapter"
import { describe, expect, it } from "vitest"
import { Effect, Exit, ManagedRuntime, Option } from "effect"
import { NOW } from "./support/contract/fixtures.js"
import { pgAvailable } from "./support/databases.js"
import { postgresAdapter } from "./support/stores.js"
import { appending, logOf } from "./support/syncstate.js"

/** Postgres, when the server answers (databases.ts warns loudly when it does not; CI requires it). */
const postgres = pgAvailable ? await postgresAdapter() : undefined

/** Progress writers racing on one row; two pools of 8 connections, so they overlap on the server. */
const WRITERS = 32

const C = "gcal"
const O = "did:owner:1"

const openStore = (connection: Sql.SqlConnection) => ManagedRuntime.make(Sql.layer({ ...connection, maxConnections: 8 }))
type Runtime = ReturnType<typeof openStore>

/**
 * Two stores on one Postgres database and table prefix, as two processes
 * would open it: separate pools, separate runtimes.
 */
const twoStores = async (): Promise<readonly [Runtime, Runtime]> => {
  const connection = await postgres!.connection()
  const open = () => openStore(connection)
  const first = open()
  await first.runtime() // migrate once before the second store opens
  return [first, open()]
}

const onBoth = async <A>(use: (stores: readonly [Runtime, Runtime]) => Promise<A>): Promise<A> => {
  const stores = await twoStores()
  try {
    return await use(stores)
  } finally {
    await Promise.all(stores.map((store) => store.dispose()))
  }
}

const call = <A, E>(runtime: Runtime, use: (store: ConnectorStore["Type"]) => Effect.Effect<A, E>) =>
  runtime.runPromiseExit(Effect.flatMap(ConnectorStore, use))

const stateOf = async (runtime: Runtime) =>
  Option.getOrUndefined(await runtime.runPromise(Effect.flatMap(ConnectorStore, (s) => s.getSyncState(C, O))))

describe.runIf(postgres !== undefined)("sync state races on Postgres, two stores with their own pools", () => {
  it("concurrent progress writers from no row: the version counts the successful writes and each landed exactly once", () =>
    onBoth(async (stores) => {
      const recomputes = new Map<string, number>()
      const exits = await Promise.all(Array.from({ length: WRITERS }, (_, i) => {
        const tag = `w${i}`
        const recompute = appending(tag)
        return call(stores[i % 2]!, (s) =>
          s.updateSyncProgress(C, O, (current) => {
            recomputes.set(tag, (recomputes.get(tag) ?? 0) + 1)
            return recompute(current)
          }, { maxRetries: 10 * WRITERS }))
      }))
      const written = exits.flatMap((exit, i) => Exit.isSuccess(exit) ? [[`w${i}`, exit.value] as const] : [])
      for (const exit of exits) if (Exit.isFailure(exit)) expect(exit.cause.toString()).toContain("SyncProgressExhausted")
      const final = (await stateOf(stores[0]))!
      expect(final.version).toBe(written.length)
      // Each success is the version it wrote; the final log holds them in that order, once each, and nothing else.
      const byVersion = [...written].sort(([, a], [, b]) => a.version - b.version)
      expect(byVersion.map(([, state]) => state.version)).toEqual(written.map((_, i) => i + 1))
      expect(logOf(final.checkpoint)).toEqual(byVersion.map(([tag]) => tag))
      for (const [tag, state] of written) expect(logOf(state.checkpoint).at(-1)).toBe(tag)
      // The writers really raced: some recomputed after losing.
      const calls = [...recomputes.values()].reduce((a, b) => a + b, 0)
      expect(calls).toBeGreaterThan(written.length)
      expect(new Set(written.map(([, state]) => state.incarnation)).size).toBe(1)
    }))

  it("progress writers racing a deleter and recreator only ever land a recompute on the incarnation it was computed from", () =>
    onBoth(async (stores) => {
      // Each recompute stamps the incarnation it read into the checkpoint it returns.
      interface Checkpoint { readonly basedOn: string | null; readonly log: ReadonlyArray<string> }
      const report = { status: "syncing", lastSyncedAt: "", entityCount: 0 } as const
      await call(stores[0], (s) => s.setSyncState(C, O, report))
      const recreations = (async () => {
        for (let round = 1; round <= 12; round++) {
          await call(stores[round % 2]!, (s) => Effect.zipRight(s.deleteSyncState(C, O), s.setSyncState(C, O, report)))
        }
      })()
      const exits = await Promise.all(Array.from({ length: WRITERS }, (_, i) =>
        call(stores[i % 2]!, (s) =>
          s.updateSyncProgress(C, O, (current) => {
            const read = current?.checkpoint as Checkpoint | null | undefined
            return { checkpoint: { basedOn: current?.incarnation ?? null, log: [...(read?.log ?? []), `w${i}`] }, recovery: null }
          }, { maxRetries: 10 * WRITERS }))))
      await recreations
      const written: Array<SyncState> = exits.flatMap((exit) => Exit.isSuccess(exit) ? [exit.value] : [])
      expect(written.length).toBeGreaterThan(0)
      for (const state of written) {
        const checkpoint = state.checkpoint as unknown as Checkpoint
        // An insert was computed from no row; any other write from the very row it landed on.
        if (checkpoint.basedOn === null) expect(state.version).toBe(1)
        else expect(checkpoint.basedOn).toBe(state.incarnation)
      }
      const final = (await stateOf(stores[1]))!
      const inFinal = written.filter((state) => state.incarnation === final.incarnation).sort((a, b) => a.version - b.version)
      expect(inFinal.map((state) => state.version)).toEqual(inFinal.map((_, i) => i + 1))
      expect(final.version).toBe(inFinal.length)
      expect(logOf(final.checkpoint)).toEqual(inFinal.map((state) => logOf(state.checkpoint).at(-1)))
    }))

  it("a stale lease holder racing a takeover on the other pool: refusals are final, and its landed writes all precede the new holder's", () =>
    onBoth(async ([staleStore, takerStore]) => {
      const first = Exit.getOrElse(await call(staleStore, (s) => s.claimSyncLease(C, O, { now: NOW, leaseMs: 1_000 })), () => expect.unreachable("claim"))
      if (first.outcome !== "claimed") return expect.unreachable("first claim")
      type Outcome = "landed" | "lost"
      const writes = async (runtime: Runtime, part: string, token: string, calls: number) => {
        const outcomes: Array<Outcome> = []
        for (let i = 0; i < calls; i++) {
          const tag = `${part}-${i}`
          const exit = await call(runtime, (s): Effect.Effect<unknown, unknown> =>
            i % 2 === 0
              ? s.updateSyncProgress(C, O, appending(tag), { leaseToken: token, maxRetries: 1_000 })
              : s.setSyncState(C, O, { status: "syncing", lastSyncedAt: tag, entityCount: i }, { leaseToken: token }))
          if (Exit.isSuccess(exit)) outcomes.push("landed")
          else if (String(exit.cause).includes("SyncLeaseLost")) outcomes.push("lost")
          else throw new Error(String(exit.cause))
        }
        return outcomes
      }
      const taker = (async () => {
        // Not before three of the stale holder's progress writes landed: the takeover comes in the middle of its run.
        while (((await stateOf(takerStore))?.version ?? 0) < 3) await new Promise((resolve) => setTimeout(resolve, 1))
        const claim = Exit.getOrElse(await call(takerStore, (s) => s.claimSyncLease(C, O, { now: NOW + 1_000, leaseMs: 60_000 })), () => expect.unreachable("takeover"))
        if (claim.outcome !== "claimed") return expect.unreachable("takeover refused")
        return writes(takerStore, "take", claim.lease.token, 40)
      })()
      const [stale, taken] = await Promise.all([writes(staleStore, "stale", first.lease.token, 200), taker])
      expect(taken.every((outcome) => outcome === "landed")).toBe(true)
      const firstLost = stale.indexOf("lost")
      if (firstLost >= 0) expect(stale.slice(firstLost).every((outcome) => outcome === "lost")).toBe(true)
      const landed = (part: string, outcomes: ReadonlyArray<Outcome>) =>
        outcomes.flatMap((outcome, i) => outcome === "landed" && i % 2 === 0 ? [`${part}-${i}`] : [])
      expect(landed("stale", stale).length).toBeGreaterThanOrEqual(3)
      const final = (await stateOf(staleStore))!
      expect(logOf(final.checkpoint)).toEqual([...landed("stale", stale), ...landed("take", taken)])
      expect(final.lastSyncedAt).toBe("take-39")
      expect(await writes(staleStore, "late", first.lease.token, 2)).toEqual(["lost", "lost"])
      expect(await stateOf(takerStore)).toEqual(final)
    }))

  it("concurrent setSyncState on no row: one row, version 0, one incarnation for every caller", () =>
    onBoth(async (stores) => {
      const exits = await Promise.all(Array.from({ length: 16 }, (_, i) =>
        call(stores[i % 2]!, (s) => s.setSyncState(C, O, { status: "idle", lastSyncedAt: `s${i}`, entityCount: i }))))
      const written = exits.map((exit) => Exit.getOrElse(exit, () => expect.unreachable(String(exit))))
      expect(new Set(written.map((state) => state.incarnation)).size).toBe(1)
      expect(written.every((state) => state.version === 0)).toBe(true)
      const listed = await stores[0].runPromise(Effect.flatMap(ConnectorStore, (s) => s.listSyncStatesForConnector(C)))
      expect(listed).toHaveLength(1)
    }))

  it("of many claims of one sync lease at one instant exactly one holds it, with and without a row to start from", () =>
    onBoth(async (stores) => {
      for (const owner of ["did:no-row-yet", O]) {
        if (owner === O) await call(stores[0], (s) => s.setSyncState(C, O, { status: "idle", lastSyncedAt: "", entityCount: 0 }))
        const exits = await Promise.all(Array.from({ length: 24 }, (_, i) =>
          call(stores[i % 2]!, (s) => s.claimSyncLease(C, owner, { now: NOW, leaseMs: 60_000 }))))
        const claims = exits.map((exit) => Exit.getOrElse(exit, () => expect.unreachable(String(exit))))
        expect(claims.filter((claim) => claim.outcome === "claimed")).toHaveLength(1)
        expect(claims.filter((claim) => claim.outcome === "busy")).toHaveLength(23)
      }
    }))

  it("claims racing an expiring lease across instants never hand out two live leases at once", () =>
    onBoth(async (stores) => {
      // Claimers with clocks 100 ms apart, leases of 1 s: only claims at least 1 s apart can both win.
      const exits = await Promise.all(Array.from({ length: 30 }, (_, i) => {
        const now = NOW + ((i * 7) % 30) * 100
        return call(stores[i % 2]!, (s) => Effect.map(s.claimSyncLease(C, O, { now, leaseMs: 1_000 }), (claim) => ({ now, claim })))
      }))
      const won = exits
        .flatMap((exit) => Exit.isSuccess(exit) && exit.value.claim.outcome === "claimed" ? [exit.value] : [])
        .sort((a, b) => a.now - b.now)
      expect(won.length).toBeGreaterThan(0)
      for (let i = 1; i < won.length; i++) {
        const previous = won[i - 1]!.claim
        expect(previous.outcome === "claimed" && won[i]!.now >= previous.lease.expiresAt).toBe(true)
      }
    }))
})
