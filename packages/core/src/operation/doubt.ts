import type { ConnectorOperation } from "./ConnectorOperation.js"

/**
 * True while a provider request of the operation may have landed and no
 * outcome settled it: a send marker is recorded and the operation is not
 * committed. Every operator action reads the in-doubt fact through this one
 * predicate.
 */
export const isInDoubt = (row: ConnectorOperation): boolean => row.state !== "committed" && row.sendMarker !== null

/** The columns of an operation whose outcome became known: no request of it is in doubt any more. */
export const doubtCleared = { sendMarker: null } as const satisfies Partial<ConnectorOperation>
