// What the any-app programs write: one operation's claim, and a watch identity.
// Imported by promise.ts and effect4.ts, which the packed install runs in apps
// on Effect 4 and on no Effect (.ci/packed-install.mjs).

/** The idempotency key of the operation `label`. */
export const keyOf = (label: string) => ({ callerDID: "did:example:app", operationID: `op-${label}` })

/** The claim of the operation `label`, with `payloadHash` (another hash under the same key is a conflict). */
export const claimInput = (label: string, payloadHash = `sha256:${label}`) => ({
  ...keyOf(label),
  ownerDID: "did:example:owner",
  connectorName: "calendar",
  model: "Event",
  op: "update" as const,
  accountKey: "owner@example.com",
  target: "calendars/primary",
  sourceID: `src-${label}`,
  deterministicEventID: `evt-${label}`,
  payloadHash,
  reissueIntent: { kind: "conditional-update" as const, ifMatch: "etag-0" },
  providerEtag: "etag-0",
  documentID: `doc-${label}`
})

/** The watch of the operation `label`'s document; `ownerDID: ""` makes it a bad one. */
export const watchOf = (label: string, ownerDID = "did:example:owner") => ({
  ownerDID,
  connectorName: "calendar",
  model: "Event",
  accountKey: "owner@example.com",
  sourceID: `src-${label}`
})

/** Throws naming `what` unless `actual` is `expected`. */
export const expectEqual = (what: string, actual: unknown, expected: unknown): void => {
  if (actual !== expected) throw new Error(`${what}: expected ${String(expected)}, got ${String(actual)}`)
}
