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
 * - `reconcile`: never re-send; the operation becomes `reconcile_only` and
 *   needs a lookup or a person.
 */
export type ReissueIntent =
  | { readonly kind: "conditional-update"; readonly ifMatch: string }
  | { readonly kind: "deterministic-create"; readonly providerID: string }
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
      return undefined
    case "conditional-update":
      return nonEmpty(value["ifMatch"]) ? undefined : "of kind conditional-update needs a non-empty ifMatch etag"
    case "deterministic-create":
      return nonEmpty(value["providerID"]) ? undefined : "of kind deterministic-create needs a non-empty providerID"
    default:
      return "must have kind conditional-update, deterministic-create or reconcile"
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
