import { allOptionNames } from "../optionNames.js"
import { type Check, fieldOf, type InputShape, LIST, optional, orNull, Rules, shapeOf } from "../validation.js"
import { isRedactedVerifier, type PendingAuthInput } from "./PendingAuth.js"

/** The fields of a `createPendingAuth` record; its scopes are read once. */
export const PENDING_AUTH_SHAPE: InputShape = shapeOf(
  allOptionNames<PendingAuthInput>()([
    "state",
    "codeVerifier",
    "provider",
    "ownerDID",
    "ownerWrappableDID",
    "controllerWrappableDID",
    "createdAt",
    "redirectURL",
    "scopes",
    "expiresAt"
  ]),
  { scopes: LIST }
)

const optionalIdOrNull = optional(orNull(Rules.id))

/** The checks of a `createPendingAuth` record. No reason ever quotes a value (the verifier is secret). */
export const pendingAuthChecks = (record: unknown): ReadonlyArray<Check> => {
  const createdAt = fieldOf(record, "createdAt")
  const expiresAt = fieldOf(record, "expiresAt")
  return [
    ["record", record, Rules.record],
    ["record.state", fieldOf(record, "state"), Rules.id],
    ["record.provider", fieldOf(record, "provider"), Rules.id],
    ["record.ownerDID", fieldOf(record, "ownerDID"), Rules.id],
    ["record.ownerWrappableDID", fieldOf(record, "ownerWrappableDID"), optionalIdOrNull],
    ["record.controllerWrappableDID", fieldOf(record, "controllerWrappableDID"), optionalIdOrNull],
    ["record.codeVerifier", fieldOf(record, "codeVerifier"), (v) =>
      isRedactedVerifier(v)
        ? undefined
        // A plain string reaches this only through the Effect API (the Promise API wraps it).
        : typeof v === "string"
        ? "must be wrapped in Redacted (Redacted.make) in the Effect API"
        : "must be an RFC 7636 code verifier (43 to 128 characters of A-Z a-z 0-9 - . _ ~)"],
    ["record.redirectURL", fieldOf(record, "redirectURL"), Rules.id],
    ["record.scopes", fieldOf(record, "scopes"), Rules.ids],
    ["record.createdAt", createdAt, optional(Rules.millis)],
    ["record.expiresAt", expiresAt, Rules.millis],
    ["record.expiresAt", expiresAt, (v) =>
      typeof createdAt === "number" && (v as number) < createdAt ? "must not be before record.createdAt" : undefined]
  ]
}
