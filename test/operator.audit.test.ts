import { ConnectorStore, InvalidInput, type OperatorActionInput } from "@connector-store/core"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { at, failsChangingNothing, onFreshStore } from "./support/contract/store.js"
import { adaptersUnderTest, type StoreServices } from "./support/stores.js"

const adapters = await adaptersUnderTest()

const NOW = 1_800_000_000_000

const entry = (overrides: Partial<OperatorActionInput> = {}): OperatorActionInput => ({
  actor: "ada@example.com",
  action: "retryOperation",
  targets: ["did:caller/op-1"],
  outcome: "done",
  answer: "retried did:caller/op-1",
  ...overrides
})

for (const adapter of adapters) {
  const onStore = <A, E>(body: Effect.Effect<A, E, StoreServices>) =>
    onFreshStore(adapter, {}, Effect.zipRight(at(NOW), body))

  describe(`the operator audit log on ${adapter.name}`, () => {
    it.effect("records an entry with the store's time and a fresh id, and lists it back as stored", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const hostile = entry({ targets: ["<script>alert(1)</script>", "a\"b'c"], answer: "refused: \"stale\" <b>" })
        const stored = yield* store.recordOperatorAction(hostile)
        expect(stored).toEqual({ ...hostile, at: NOW, actionID: stored.actionID })
        expect(stored.actionID.length).toBeGreaterThan(0)
        const page = yield* store.listOperatorActions()
        expect(page).toEqual({ items: [stored], nextCursor: null, corrupt: [] })
      })))

    it.effect("lists newest first, a keyset page at a time, filtered by actor and action", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const first = yield* store.recordOperatorAction(entry({ targets: ["t-1"] }))
        yield* at(NOW + 1000)
        const second = yield* store.recordOperatorAction(entry({ actor: "bob", action: "pauseProvider", targets: ["github/acct"] }))
        yield* at(NOW + 2000)
        const third = yield* store.recordOperatorAction(entry({ targets: ["t-3", "t-4"], outcome: "partial" }))
        const one = yield* store.listOperatorActions({ limit: 2 })
        expect(one.items).toEqual([third, second])
        expect(one.nextCursor).not.toBeNull()
        const two = yield* store.listOperatorActions({ limit: 2, cursor: one.nextCursor! })
        expect(two).toEqual({ items: [first], nextCursor: null, corrupt: [] })
        expect((yield* store.listOperatorActions({ actor: "bob" })).items).toEqual([second])
        expect((yield* store.listOperatorActions({ action: "retryOperation" })).items).toEqual([third, first])
      })))

    it.effect("entries recorded in the same millisecond all appear once across pages", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const made = yield* Effect.forEach([1, 2, 3, 4, 5], (n) => store.recordOperatorAction(entry({ targets: [`t-${n}`] })))
        const seen: Array<string> = []
        let cursor: string | undefined
        do {
          const page = yield* store.listOperatorActions({ limit: 2, cursor })
          seen.push(...page.items.map((item) => item.actionID))
          cursor = page.nextCursor ?? undefined
        } while (cursor !== undefined)
        expect([...seen].sort()).toEqual(made.map((item) => item.actionID).sort())
      })))

    const refusals: ReadonlyArray<readonly [string, unknown, string]> = [
      ["an empty actor", entry({ actor: "" }), "entry.actor"],
      ["an unknown outcome", { ...entry(), outcome: "maybe" }, "entry.outcome"],
      ["targets that are not ids", { ...entry(), targets: ["ok", 3] }, "entry.targets"],
      ["too many targets", entry({ targets: Array.from({ length: 1001 }, (_, i) => `t-${i}`) }), "entry.targets"],
      ["an answer with NUL", entry({ answer: "a\u0000b" }), "entry.answer"],
      ["an unknown field", { ...entry(), who: "x" }, "entry.who"],
      ["no entry at all", undefined, "entry"]
    ]
    for (const [what, input, field] of refusals) {
      it.effect(`refuses ${what} as InvalidInput naming ${field}, writing nothing`, () =>
        onStore(Effect.gen(function*() {
          const store = yield* ConnectorStore
          const error = yield* failsChangingNothing(store.recordOperatorAction(input as OperatorActionInput))
          expect(error).toBeInstanceOf(InvalidInput)
          expect((error as InvalidInput).field).toBe(field)
          expect((yield* store.listOperatorActions()).items).toEqual([])
        })))
    }

    it.effect("refuses a cursor it did not make and a page size over 500", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const cursor = yield* Effect.flip(store.listOperatorActions({ cursor: "bm90LWEtY3Vyc29y" }))
        expect(cursor).toMatchObject({ _tag: "InvalidInput", field: "filter.cursor" })
        const limit = yield* Effect.flip(store.listOperatorActions({ limit: 501 }))
        expect(limit).toMatchObject({ _tag: "InvalidInput", field: "filter.limit" })
      })))
  })
}
