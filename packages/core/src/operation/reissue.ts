/**
 * How a re-drive may re-send after a request may have landed:
 *
 * - `conditional-update`: as an update conditional on `ifMatch`; a landed first request makes the provider refuse it.
 * - `deterministic-create`: as a create with the provider id `providerID`; a landed first request makes the id taken.
 * - `idempotent-delete` (a delete only): the delete again; "gone" (404, 410) means applied.
 * - `reconcile`: never; the operation becomes `reconcile_only`.
 */
export type ReissueIntent =
  | { readonly kind: "conditional-update"; readonly ifMatch: string }
  | { readonly kind: "deterministic-create"; readonly providerID: string }
  | { readonly kind: "idempotent-delete" }
  | { readonly kind: "reconcile" }

/** The intents under which a request that may have landed can safely be sent again. */
export type SafeReissue = Exclude<ReissueIntent, { readonly kind: "reconcile" }>

const isRecord = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const nonEmpty = (value: unknown): value is string => typeof value === "string" && value.length > 0

/** What is wrong with `value` as a `ReissueIntent`, or `undefined` when it is one. */
export const reissueIntentProblem = (value: unknown): string | undefined => {
  if (!isRecord(value)) return "must be a reissue intent object"
  switch (value["kind"]) {
    case "reconcile":
    case "idempotent-delete":
      return undefined
    case "conditional-update":
      return nonEmpty(value["ifMatch"]) ? undefined : "of kind conditional-update needs a non-empty ifMatch etag"
    case "deterministic-create":
      return nonEmpty(value["providerID"]) ? undefined : "of kind deterministic-create needs a non-empty providerID"
    default:
      return "must have kind conditional-update, deterministic-create, idempotent-delete or reconcile"
  }
}

/** The safe way to re-send under a stored intent, or `undefined` (fail-closed: anything malformed allows none). */
export const safeReissue = (stored: unknown): SafeReissue | undefined => {
  if (reissueIntentProblem(stored) !== undefined) return undefined
  const intent = stored as ReissueIntent
  return intent.kind === "reconcile" ? undefined : intent
}

/** The operation kinds each reissue intent fits (`reconcile` fits every kind). */
const FITS: Readonly<Record<ReissueIntent["kind"], ReadonlyArray<string>>> = {
  "conditional-update": ["update"],
  "deterministic-create": ["create"],
  "idempotent-delete": ["delete"],
  reconcile: ["create", "update", "delete"]
}

/** What is wrong with re-sending an `op` under `intent`, or `undefined`: a delete re-sends only as a delete, and nothing else as one. */
export const reissueFitProblem = (op: string, intent: ReissueIntent): string | undefined =>
  FITS[intent.kind].includes(op) || (intent.kind !== "idempotent-delete" && op !== "delete")
    ? undefined
    : intent.kind === "idempotent-delete"
    ? "of kind idempotent-delete fits only op delete"
    : `of kind ${intent.kind} does not fit op delete (use idempotent-delete or reconcile)`
