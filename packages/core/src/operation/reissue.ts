/**
 * How a re-drive may re-send after a previous attempt's request may have
 * landed (its send marker is set and no outcome was recorded):
 *
 * - `conditional-update`: re-send as an update conditional on `ifMatch` (the
 *   provider etag the edit was based on). If the first request landed, the
 *   provider refuses the second, so it cannot apply twice.
 * - `deterministic-create`: re-send as a create with the deterministic
 *   provider id `providerID`. If the first request landed, the provider
 *   reports the id as taken, so the entity cannot be created twice.
 * - `idempotent-delete` (a `delete` only): re-send the delete. If the first
 *   request landed, the provider answers that the entity is gone (404 Not
 *   Found or 410 Gone): that answer means applied, and the runner finalizes
 *   the delete as committed. A delete cannot apply twice.
 * - `reconcile`: never re-send; the operation becomes `reconcile_only` and
 *   needs a lookup or a person.
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

/**
 * The safe way to re-send under a stored intent, or `undefined` when there is
 * none. Fails closed: a stored value that is not a well-formed safe intent
 * (including anything a different writer left in the column) never allows a
 * re-send.
 */
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

/**
 * What is wrong with re-sending an `op` under `intent` (both well-formed),
 * or `undefined` when the intent fits the kind: a delete re-sends only as a
 * delete, and a create or an update never as one.
 */
export const reissueFitProblem = (op: string, intent: ReissueIntent): string | undefined =>
  FITS[intent.kind].includes(op) || (intent.kind !== "idempotent-delete" && op !== "delete")
    ? undefined
    : intent.kind === "idempotent-delete"
    ? "of kind idempotent-delete fits only op delete"
    : `of kind ${intent.kind} does not fit op delete (use idempotent-delete or reconcile)`
