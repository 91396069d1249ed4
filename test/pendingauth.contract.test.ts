import { randomBytes } from "node:crypto"
import { ConnectorStore, type PendingAuth, type PendingAuthInput, type StoreSnapshot } from "@connector-store/core"
import { Tables } from "@connector-store/sql-adapter"
import { describe, expect, it, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql/SqlClient"
import { Cause, Effect, Exit, Layer, Option, Redacted } from "effect"
import { NOW } from "./support/contract/fixtures.js"
import { at, failsChangingNothing, onFreshStore, snapshot, succeedsChangingNothing } from "./support/contract/store.js"
import { adaptersUnderTest } from "./support/stores.js"
import { revealsNothing, watchingLogsAndSpans } from "./support/secrecy.js"

const adapters = await adaptersUnderTest()

/** A fresh RFC 7636 verifier (32 random bytes, base64url: 43 characters). */
const newVerifier = (): string => randomBytes(32).toString("base64url")

const recordOf = (overrides: Partial<PendingAuthInput> = {}, verifier = newVerifier()): PendingAuthInput => ({
  state: "state-1",
  provider: "gcal",
  ownerDID: "did:owner:1",
  codeVerifier: Redacted.make(verifier),
  redirectURL: "https://app.example/oauth/callback",
  scopes: ["calendar.read", "calendar.write"],
  createdAt: NOW,
  expiresAt: NOW + 600_000,
  ...overrides
})

/** A record's fields with the verifier revealed, for comparing records. */
const plain = (record: PendingAuth | PendingAuthInput) => ({ ...record, codeVerifier: Redacted.value(record.codeVerifier) })

const consume = (state: string, now?: number) =>
  Effect.flatMap(ConnectorStore, (s) => s.consumePendingAuth(state, now === undefined ? undefined : { now }))

for (const adapter of adapters) {
  const onStore = <A, E>(body: Effect.Effect<A, E, ConnectorStore | StoreSnapshot>) =>
    onFreshStore(adapter, {}, Effect.zipRight(at(NOW), body))

  describe(`pending OAuth on ${adapter.name}`, () => {
    it.effect("a created authorization is consumed once: the first consume gets it exactly, the next finds nothing", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const record = recordOf()
        yield* store.createPendingAuth(record)
        yield* store.createPendingAuth(recordOf({ state: "state-2" }))
        const taken = Option.getOrThrow(yield* consume("state-1", NOW))
        expect(plain(taken)).toEqual(plain(record))
        expect(yield* succeedsChangingNothing(consume("state-1", NOW))).toEqual(Option.none())
        expect((yield* snapshot)["pending_auth"]).toHaveLength(1)
      })))

    it.effect("the original's wrappable DIDs are kept when given and absent when not (null stores none)", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const both = recordOf({ state: "both", ownerWrappableDID: "did:owner:wrap", controllerWrappableDID: "did:controller:wrap" })
        yield* store.createPendingAuth(both)
        yield* store.createPendingAuth(recordOf({ state: "nulls", ownerWrappableDID: null, controllerWrappableDID: null }))
        yield* store.createPendingAuth(recordOf({ state: "owner-only", ownerWrappableDID: "did:o:w" }))
        expect(plain(Option.getOrThrow(yield* consume("both", NOW)))).toEqual(plain(both))
        const nulls = Option.getOrThrow(yield* consume("nulls", NOW))
        expect("ownerWrappableDID" in nulls || "controllerWrappableDID" in nulls).toBe(false)
        const ownerOnly = Option.getOrThrow(yield* consume("owner-only", NOW))
        expect([ownerOnly.ownerWrappableDID, "controllerWrappableDID" in ownerOnly]).toEqual(["did:o:w", false])
      })))

    it.effect("createdAt defaults to the store's clock; a field the record does not have is refused", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const { createdAt: _, ...rest } = recordOf()
        const error = yield* failsChangingNothing(store.createPendingAuth({ ...rest, extra: "not stored" } as PendingAuthInput))
        expect(error).toMatchObject({ _tag: "InvalidInput", method: "createPendingAuth", field: "record.extra" })
        yield* store.createPendingAuth(rest as PendingAuthInput)
        const taken = Option.getOrThrow(yield* consume("state-1"))
        expect(plain(taken)).toEqual({ ...plain(rest as PendingAuthInput), createdAt: NOW })
      })))

    it.effect("a second create with a state in use fails with PendingAuthStateTaken and leaves the first record untouched", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const first = recordOf()
        yield* store.createPendingAuth(first)
        const duplicate = recordOf({ ownerDID: "did:attacker" })
        const error = yield* failsChangingNothing(store.createPendingAuth(duplicate))
        expect(error).toMatchObject({ _tag: "PendingAuthStateTaken", state: "state-1" })
        revealsNothing(error, Redacted.value(duplicate.codeVerifier))
        expect(plain(Option.getOrThrow(yield* consume("state-1", NOW)))).toEqual(plain(first))
      })))

    it.effect("consuming a state nobody created finds nothing and changes nothing", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        yield* store.createPendingAuth(recordOf())
        expect(yield* succeedsChangingNothing(consume("state-unknown", NOW))).toEqual(Option.none())
      })))

    it.effect("a record is good through its expiresAt instant; consumed one instant later it is not returned, and gone", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const expiresAt = NOW + 1_000
        yield* store.createPendingAuth(recordOf({ state: "on-time", expiresAt }))
        yield* store.createPendingAuth(recordOf({ state: "late", expiresAt }))
        expect(Option.isSome(yield* consume("on-time", expiresAt))).toBe(true)
        expect(yield* consume("late", expiresAt + 1)).toEqual(Option.none())
        expect((yield* snapshot)["pending_auth"] ?? []).toEqual([])
      })))

    it.effect("consume without a time judges expiry by the store's clock", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        yield* store.createPendingAuth(recordOf({ state: "a", expiresAt: NOW + 10 }))
        yield* store.createPendingAuth(recordOf({ state: "b", expiresAt: NOW + 10 }))
        yield* at(NOW + 10)
        expect(Option.isSome(yield* consume("a"))).toBe(true)
        yield* at(NOW + 11)
        expect(yield* consume("b")).toEqual(Option.none())
      })))

    it.effect("deleteExpiredPendingAuth removes what expired strictly before the cutoff and keeps what expires at it", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const cutoff = NOW + 5_000
        for (const [state, expiresAt] of [["old", NOW], ["just-before", cutoff - 1], ["at", cutoff], ["after", cutoff + 1]] as const) {
          yield* store.createPendingAuth(recordOf({ state, expiresAt }))
        }
        expect(yield* store.deleteExpiredPendingAuth(cutoff)).toBe(2)
        expect(yield* succeedsChangingNothing(store.deleteExpiredPendingAuth(cutoff))).toBe(0)
        for (const state of ["old", "just-before"]) expect(yield* consume(state, NOW)).toEqual(Option.none())
        for (const state of ["at", "after"]) expect(Option.isSome(yield* consume(state, NOW))).toBe(true)
      })))

    it.effect("the verifier never shows when a record is printed, inspected, logged or put on a span", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const verifier = newVerifier()
        yield* store.createPendingAuth(recordOf({}, verifier))
        const watched = yield* watchingLogsAndSpans(Effect.gen(function*() {
          const taken = Option.getOrThrow(yield* consume("state-1", NOW))
          yield* Effect.annotateCurrentSpan("pendingAuth", taken)
          yield* Effect.logInfo("consumed", taken)
          expect(Redacted.value(taken.codeVerifier)).toBe(verifier)
          return taken
        }))
        const taken = Exit.getOrElse(watched.exit, () => expect.unreachable("the consume failed"))
        revealsNothing(taken, verifier)
        revealsNothing(watched.lines, verifier)
        revealsNothing(watched.spans, verifier)
        expect(watched.lines.length).toBeGreaterThan(0)
      })))

    // One store for the refusals; each proves it changed nothing and does not quote the verifier.
    layer(Layer.suspend(() => adapter.layer({})))("bad input: a typed error naming the field, nothing changed, no verifier in it", (it) => {
      const seeded = Effect.gen(function*() {
        const store = yield* ConnectorStore
        if ((yield* snapshot)["pending_auth"]?.length !== 1) yield* store.createPendingAuth(recordOf({ state: "seeded" }))
        return store
      })
      const verifier = newVerifier()
      const good = recordOf({}, verifier)
      const cases: ReadonlyArray<readonly [string, string, (s: ConnectorStore["Type"]) => Effect.Effect<unknown, unknown>]> = [
        ["create with an empty state", "record.state", (s) => s.createPendingAuth({ ...good, state: "" })],
        ["create with an empty provider", "record.provider", (s) => s.createPendingAuth({ ...good, provider: "" })],
        ["create with an empty owner wrappable DID", "record.ownerWrappableDID", (s) => s.createPendingAuth({ ...good, ownerWrappableDID: "" })],
        ["create with a numeric controller wrappable DID", "record.controllerWrappableDID", (s) => s.createPendingAuth({ ...good, controllerWrappableDID: 7 as never })],
        ["create with a non-string owner", "record.ownerDID", (s) => s.createPendingAuth({ ...good, ownerDID: 1 as never })],
        ["create with the verifier as a plain string", "record.codeVerifier", (s) => s.createPendingAuth({ ...good, codeVerifier: verifier as never })],
        ["create with a 42-character verifier", "record.codeVerifier", (s) => s.createPendingAuth({ ...good, codeVerifier: Redacted.make(verifier.slice(1)) })],
        ["create with a forbidden character in the verifier", "record.codeVerifier", (s) => s.createPendingAuth({ ...good, codeVerifier: Redacted.make(`${verifier}!`) })],
        ["create with an empty redirect URL", "record.redirectURL", (s) => s.createPendingAuth({ ...good, redirectURL: "" })],
        ["create with scopes that are not an array", "record.scopes", (s) => s.createPendingAuth({ ...good, scopes: "calendar" as never })],
        ["create with an empty scope", "record.scopes", (s) => s.createPendingAuth({ ...good, scopes: ["a", ""] })],
        ["create with a NaN expiry", "record.expiresAt", (s) => s.createPendingAuth({ ...good, expiresAt: Number.NaN })],
        ["create expiring before it was created", "record.expiresAt", (s) => s.createPendingAuth({ ...good, expiresAt: NOW - 1 })],
        ["create with a negative createdAt", "record.createdAt", (s) => s.createPendingAuth({ ...good, createdAt: -5 })],
        ["create with no record", "record", (s) => s.createPendingAuth(undefined as never)],
        ["consume with an empty state", "state", (s) => s.consumePendingAuth("")],
        ["consume with a NaN now", "options.now", (s) => s.consumePendingAuth("seeded", { now: Number.NaN })],
        ["deleteExpired with a NaN cutoff", "cutoff", (s) => s.deleteExpiredPendingAuth(Number.NaN)],
        ["deleteExpired with a negative cutoff", "cutoff", (s) => s.deleteExpiredPendingAuth(-1)],
        ["deleteExpired with a fractional cutoff", "cutoff", (s) => s.deleteExpiredPendingAuth(1.5)]
      ]
      for (const [label, field, call] of cases) {
        it.effect(label, () =>
          Effect.gen(function*() {
            const store = yield* seeded
            const error = yield* failsChangingNothing(call(store))
            expect(error).toMatchObject({ _tag: "InvalidInput", field })
            revealsNothing(error, verifier)
            expect((yield* snapshot)["pending_auth"]).toHaveLength(1)
          }))
      }
    })

    if (adapter.name !== "memory") {
      describe("storage failures that quote the row reach the caller without the verifier", () => {
        /** Runs statements on the store's own database (the SQL adapters expose their client and tables). */
        const onDatabase = (statements: (table: string, prefix: string) => ReadonlyArray<string>) =>
          Effect.gen(function*() {
            const sql = Option.getOrThrow(yield* Effect.serviceOption(SqlClient))
            const tables = Option.getOrThrow(yield* Effect.serviceOption(Tables))
            for (const statement of statements(tables.pendingAuth, tables.prefix)) yield* sql.unsafe(statement)
          }).pipe(Effect.orDie)

        const raising = (when: "INSERT" | "DELETE", row: "NEW" | "OLD") =>
          onDatabase((table, prefix) =>
            adapter.name === "sqlite"
              ? [`CREATE TRIGGER ${prefix}quote_${when} BEFORE ${when} ON ${table}
                   BEGIN SELECT RAISE(ABORT, 'refused: ' || ${row}.code_verifier); END`]
              : [
                `CREATE FUNCTION ${prefix}quote_${when}() RETURNS trigger LANGUAGE plpgsql AS
                   $$ BEGIN RAISE EXCEPTION 'refused: %', ${row}.code_verifier; END $$`,
                `CREATE TRIGGER ${prefix}quote_${when} BEFORE ${when} ON ${table}
                   FOR EACH ROW EXECUTE FUNCTION ${prefix}quote_${when}()`
              ])

        const expectScrubbed = <A, E>(call: Effect.Effect<A, E, ConnectorStore>, verifier: string) =>
          Effect.gen(function*() {
            const watched = yield* watchingLogsAndSpans(call)
            const exit = watched.exit
            if (Exit.isSuccess(exit) || !Cause.isFailType(exit.cause)) {
              return yield* Effect.dieMessage(`expected a typed failure, got ${String(exit)}`)
            }
            const error = exit.cause.error as { readonly _tag: string; readonly operation: string; readonly message: string }
            expect(error._tag).toBe("PersistenceError")
            expect(error.message).toContain("refused")
            revealsNothing(error, verifier)
            revealsNothing(Cause.pretty(exit.cause), verifier)
            revealsNothing(watched.spans, verifier)
            revealsNothing(watched.lines, verifier)
            // The enclosing span ended with the failure: the check above looked at something.
            expect(watched.spans.find((span) => span.name === "test.watched")?.exit?._tag).toBe("Failure")
          })

        it.effect("a create refused by a trigger that quotes the verifier", () =>
          onStore(Effect.gen(function*() {
            yield* raising("INSERT", "NEW")
            const verifier = newVerifier()
            yield* expectScrubbed(Effect.flatMap(ConnectorStore, (s) => s.createPendingAuth(recordOf({}, verifier))), verifier)
          })))

        it.effect("a consume refused by a trigger that quotes the stored verifier", () =>
          onStore(Effect.gen(function*() {
            const verifier = newVerifier()
            yield* Effect.flatMap(ConnectorStore, (s) => s.createPendingAuth(recordOf({}, verifier)))
            yield* raising("DELETE", "OLD")
            yield* expectScrubbed(consume("state-1", NOW), verifier)
          })))

        if (adapter.name === "postgres") {
          it.effect("a create refused by a check constraint (Postgres quotes the failing row in the error's detail)", () =>
            onStore(Effect.gen(function*() {
              yield* onDatabase((table, prefix) => [
                `ALTER TABLE ${table} ADD CONSTRAINT ${prefix}refused CHECK (length(redirect_url) < 5)`
              ])
              const verifier = newVerifier()
              const call = Effect.flatMap(ConnectorStore, (s) => s.createPendingAuth(recordOf({}, verifier)))
              const error = yield* Effect.flip(call)
              expect(error).toMatchObject({ _tag: "PersistenceError", operation: "pendingAuth.insert" })
              expect(error.message).toContain("check constraint")
              revealsNothing(error, verifier)
            })))
        }
      })
    }
  })
}
