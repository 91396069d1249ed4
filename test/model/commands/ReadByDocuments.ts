import { ConnectorStore, type ProjectionWatch } from "@connector-store/core"
import { Effect, Option } from "effect"
import fc from "fast-check"
import { expect } from "vitest"
import { context, expectAgreement, logCommand, outcomeOf } from "../agreement.js"
import type { RealStore } from "../RealStore.js"
import { DOCUMENTS } from "../universe.js"
import { type WatchModel, watchKeyOf } from "../WatchModel.js"
import { ModelCommand } from "./ModelCommand.js"

/**
 * The document-keyed reads. `listWatchesByDocuments` returns every watch of
 * the listed documents once, however often a document is listed;
 * `getWatchByDocument` returns one watch of that document (which one, when
 * several owners watch it, the contract leaves open) or none.
 */
export class ReadByDocuments extends ModelCommand {
  constructor(readonly documentIDs: ReadonlyArray<string>) {
    super()
  }

  static readonly arbitrary = fc.array(fc.constantFrom(...DOCUMENTS), { maxLength: 5 })
    .map((ids) => new ReadByDocuments(ids))

  async run(m: WatchModel, r: RealStore): Promise<void> {
    logCommand(m, String(this))
    const listed = outcomeOf(await r.run(Effect.flatMap(ConnectorStore, (s) => s.listWatchesByDocuments(this.documentIDs))))
    const wanted = [...m.watches.values()].filter((row) => this.documentIDs.includes(row.documentID))
    const byKey = (rows: ReadonlyArray<ProjectionWatch>) => [...rows].sort((a, b) => watchKeyOf(a) < watchKeyOf(b) ? -1 : 1)
    if (!("ok" in listed)) throw new Error(context(m, `listWatchesByDocuments failed: ${listed.fail}`))
    expect(byKey(listed.ok), context(m, "listWatchesByDocuments differs from the model's rows")).toEqual(byKey(wanted))

    for (const documentID of new Set(this.documentIDs)) {
      const one = outcomeOf(
        await r.run(Effect.flatMap(ConnectorStore, (s) => Effect.map(s.getWatchByDocument(documentID), Option.getOrNull)))
      )
      if (!("ok" in one)) throw new Error(context(m, `getWatchByDocument failed: ${one.fail}`))
      const candidates = wanted.filter((row) => row.documentID === documentID)
      if (candidates.length === 0) expect(one.ok, context(m, `getWatchByDocument(${documentID}) found a row`)).toBeNull()
      else expect(candidates, context(m, `getWatchByDocument(${documentID}) is none of its watches`)).toContainEqual(one.ok)
    }
    await expectAgreement(m, r)
  }

  toString(): string {
    return `readByDocuments([${this.documentIDs.join(", ")}])`
  }
}
