/** The typed surface of drive.mjs the tests use. */
export declare const STORE_ERROR_TAGS: ReadonlySet<string>
export declare class Aborted extends Error {}
export declare const storeCall: <A>(
  report: (event: Record<string, unknown>) => void,
  method: string,
  run: () => Promise<A>
) => Promise<A>
export interface ProviderRequest {
  readonly key: string
  readonly documentID: string | null
  readonly reissue: string | null
  readonly op: "update" | "create" | "delete"
  readonly entityID?: string
  readonly ifMatch?: string
  readonly providerID?: string
}
export declare const requestFor: (
  input: {
    readonly operationID: string
    readonly documentID: string | null
    readonly op: string
    readonly sourceID: string | null
    readonly reissueIntent: { readonly kind: string; readonly ifMatch?: string; readonly providerID?: string }
  },
  reissue: { readonly kind: string; readonly ifMatch?: string; readonly providerID?: string } | null
) => ProviderRequest
/** One provider request: `{ status, body }`, or `{ status: "timeout" }` when no answer came in time. */
export declare const send: (
  providerUrl: string,
  path: string,
  body?: Record<string, unknown>,
  timeoutMs?: number
) => Promise<{ readonly status: number | "timeout"; readonly body?: unknown }>
