import { randomBytes } from "node:crypto"
import { ConnectorStore } from "@connector-store/core"
import * as Sql from "@connector-store/sql-adapter"
import { Effect, Exit, ManagedRuntime, Option, Redacted } from "effect"
import { describe, expect, it } from "vitest"
import { NOW } from "./support/contract/fixtures.js"
import { pgAvailable } from "./support/databases.js"
import { postgresAdapter } from "./support/stores.js"

/** Postgres, when the server answers (databases.ts warns loudly when it does not; CI requires it). */
const postgres = pgAvailable ? await postgresAdapter() : undefined

const STATES = 10
const CONSUMERS = 20

describe.runIf(postgres !== undefined)("pending OAuth races on Postgres, two stores with their own pools", () => {
  it(`of ${CONSUMERS} concurrent consumes of one state exactly one gets the record, for each of ${STATES} states`, async () => {
    const connection = await postgres!.connection()
    const open = () => ManagedRuntime.make(Sql.layer({ ...connection, maxConnections: 8 }))
    const first = open()
    await first.runtime()
    const stores = [first, open()] as const
    try {
      const verifiers = Array.from({ length: STATES }, () => randomBytes(32).toString("base64url"))
      await first.runPromise(Effect.flatMap(ConnectorStore, (s) =>
        Effect.forEach(verifiers, (verifier, i) =>
          s.createPendingAuth({
            state: `state-${i}`,
            provider: "gcal",
            ownerDID: "did:owner:1",
            codeVerifier: Redacted.make(verifier),
            redirectURL: "https://app.example/cb",
            scopes: [],
            createdAt: NOW,
            expiresAt: NOW + 60_000
          }))))
      const exits = await Promise.all(Array.from({ length: STATES * CONSUMERS }, (_, n) => {
        const state = `state-${n % STATES}`
        return stores[n % 2]!.runPromiseExit(Effect.flatMap(ConnectorStore, (s) =>
          Effect.map(s.consumePendingAuth(state, { now: NOW }), (taken) => ({ state, taken }))))
      }))
      const consumed = exits.map((exit) => Exit.getOrElse(exit, () => expect.unreachable(String(exit))))
      for (let i = 0; i < STATES; i++) {
        const got = consumed.filter(({ state, taken }) => state === `state-${i}` && Option.isSome(taken))
        expect(got).toHaveLength(1)
        expect(Redacted.value(Option.getOrThrow(got[0]!.taken).codeVerifier)).toBe(verifiers[i])
      }
      expect(await first.runPromise(Effect.flatMap(ConnectorStore, (s) => s.deleteExpiredPendingAuth(Number.MAX_SAFE_INTEGER))))
        .toBe(0)
    } finally {
      await Promise.all(stores.map((store) => store.dispose()))
    }
  })
})
