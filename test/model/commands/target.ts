import type { WatchIdentity } from "@connector-store/core"
import fc from "fast-check"
import { IDENTITIES, identityArb, labelOf } from "../universe.js"
import { type WatchModel, watchKeyOf } from "../WatchModel.js"

/**
 * Which watch a command acts on: mostly one that exists when the command
 * runs (the `index`-th row, by identity), sometimes any identity of the
 * universe, with or without a row.
 */
export type Target = { readonly existing: number } | { readonly any: WatchIdentity }

/** Mostly an existing row, now and then any identity. */
export const targetArb: fc.Arbitrary<Target> = fc.oneof(
  { arbitrary: fc.nat({ max: 7 }).map((existing): Target => ({ existing })), weight: 5 },
  { arbitrary: identityArb.map((any): Target => ({ any })), weight: 1 }
)

/** The identity `target` names in the model's current state. */
export const resolveTarget = (m: WatchModel, target: Target): WatchIdentity => {
  if ("any" in target) return target.any
  const rows = [...m.watches.values()].sort((a, b) => watchKeyOf(a) < watchKeyOf(b) ? -1 : 1)
  const row = rows[target.existing % Math.max(rows.length, 1)]
  return row ?? IDENTITIES[target.existing % IDENTITIES.length]!
}

/** How a target reads in a command's name. */
export const targetLabel = (target: Target): string => "any" in target ? labelOf(target.any) : `row#${target.existing}`
