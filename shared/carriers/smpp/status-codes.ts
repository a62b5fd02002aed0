/**
 * What a submit_sm_resp command_status means for an attempt. Pure table, documented in
 * docs/smpp.md ("Status mapping"):
 *
 * - `retry`: the SMSC is busy (throttled, queue full) or our bind is in a bad state; the same PDU
 *   is sent again later and the connection slows down. The attempt does not change state.
 * - `rejected`: the SMSC refused this message for what it is (addresses, parameters, content);
 *   sending it again would not help. The attempt ends `rejected` and is refunded (D3).
 * - `failed`: anything else (system errors, vendor-specific and unknown codes). The attempt ends
 *   `failed` and is refunded (D3).
 *
 * `result_info` is `[<decimal status>] <name>`, e.g. `[8] ESME_RSYSERR`, `[11] ESME_RINVDSTADR`.
 */

export type SubmitStatusClass = 'ok' | 'retry' | 'rejected' | 'failed';

/** SMPP 3.4 command_status names (§5.1.3), plus the two generic 5.0 codes seen in the field. */
export const SMPP_STATUS_NAMES: Readonly<Record<number, string>> = {
  0x00: 'ESME_ROK',
  0x01: 'ESME_RINVMSGLEN',
  0x02: 'ESME_RINVCMDLEN',
  0x03: 'ESME_RINVCMDID',
  0x04: 'ESME_RINVBNDSTS',
  0x05: 'ESME_RALYBND',
  0x06: 'ESME_RINVPRTFLG',
  0x07: 'ESME_RINVREGDLVFLG',
  0x08: 'ESME_RSYSERR',
  0x0a: 'ESME_RINVSRCADR',
  0x0b: 'ESME_RINVDSTADR',
  0x0c: 'ESME_RINVMSGID',
  0x0d: 'ESME_RBINDFAIL',
  0x0e: 'ESME_RINVPASWD',
  0x0f: 'ESME_RINVSYSID',
  0x11: 'ESME_RCANCELFAIL',
  0x13: 'ESME_RREPLACEFAIL',
  0x14: 'ESME_RMSGQFUL',
  0x15: 'ESME_RINVSERTYP',
  0x33: 'ESME_RINVNUMDESTS',
  0x34: 'ESME_RINVDLNAME',
  0x40: 'ESME_RINVDESTFLAG',
  0x42: 'ESME_RINVSUBREP',
  0x43: 'ESME_RINVESMCLASS',
  0x44: 'ESME_RCNTSUBDL',
  0x45: 'ESME_RSUBMITFAIL',
  0x48: 'ESME_RINVSRCTON',
  0x49: 'ESME_RINVSRCNPI',
  0x50: 'ESME_RINVDSTTON',
  0x51: 'ESME_RINVDSTNPI',
  0x53: 'ESME_RINVSYSTYP',
  0x54: 'ESME_RINVREPFLAG',
  0x55: 'ESME_RINVNUMMSGS',
  0x58: 'ESME_RTHROTTLED',
  0x61: 'ESME_RINVSCHED',
  0x62: 'ESME_RINVEXPIRY',
  0x63: 'ESME_RINVDFTMSGID',
  0x64: 'ESME_RX_T_APPN',
  0x65: 'ESME_RX_P_APPN',
  0x66: 'ESME_RX_R_APPN',
  0x67: 'ESME_RQUERYFAIL',
  0xc0: 'ESME_RINVOPTPARSTREAM',
  0xc1: 'ESME_ROPTPARNOTALLWD',
  0xc2: 'ESME_RINVPARLEN',
  0xc3: 'ESME_RMISSINGOPTPARAM',
  0xc4: 'ESME_RINVOPTPARAMVAL',
  0xfe: 'ESME_RDELIVERYFAILURE',
  0xff: 'ESME_RUNKNOWNERR',
};

/** Busy or bind-state statuses: send the same PDU again later, slower. */
export const RETRY_STATUSES: ReadonlySet<number> = new Set([
  0x14, // ESME_RMSGQFUL: message queue full
  0x58, // ESME_RTHROTTLED: throttling error
  0x04, // ESME_RINVBNDSTS: the SMSC thinks we are not bound (the session rebinds on its own)
]);

/** The message itself is refused: addresses, parameters or content. */
export const REJECTED_STATUSES: ReadonlySet<number> = new Set([
  0x01, // ESME_RINVMSGLEN
  0x06, // ESME_RINVPRTFLG
  0x07, // ESME_RINVREGDLVFLG
  0x0a, // ESME_RINVSRCADR
  0x0b, // ESME_RINVDSTADR
  0x15, // ESME_RINVSERTYP
  0x33, // ESME_RINVNUMDESTS
  0x40, // ESME_RINVDESTFLAG
  0x42, // ESME_RINVSUBREP
  0x43, // ESME_RINVESMCLASS
  0x48, // ESME_RINVSRCTON
  0x49, // ESME_RINVSRCNPI
  0x50, // ESME_RINVDSTTON
  0x51, // ESME_RINVDSTNPI
  0x54, // ESME_RINVREPFLAG
  0x55, // ESME_RINVNUMMSGS
  0x61, // ESME_RINVSCHED
  0x62, // ESME_RINVEXPIRY
  0x63, // ESME_RINVDFTMSGID
  0x66, // ESME_RX_R_APPN: rejected by the receiving application
  0xc0, // ESME_RINVOPTPARSTREAM
  0xc1, // ESME_ROPTPARNOTALLWD
  0xc2, // ESME_RINVPARLEN
  0xc3, // ESME_RMISSINGOPTPARAM
  0xc4, // ESME_RINVOPTPARAMVAL
]);

export function smppStatusName(status: number): string {
  return SMPP_STATUS_NAMES[status] ?? `0x${status.toString(16).padStart(8, '0')}`;
}

export function classifySubmitStatus(status: number): SubmitStatusClass {
  if (status === 0) return 'ok';
  if (RETRY_STATUSES.has(status)) return 'retry';
  if (REJECTED_STATUSES.has(status)) return 'rejected';
  return 'failed';
}

/** `[8] ESME_RSYSERR` */
export function statusResultInfo(status: number, detail?: string): string {
  return `[${status}] ${smppStatusName(status)}${detail ? ` (${detail})` : ''}`;
}
