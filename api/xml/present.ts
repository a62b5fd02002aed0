/**
 * Response documents for the legacy XML sending API (exact bytes).
 *
 * Layout follows decision D9 literally: Response is a direct child of Result,
 * beside ResultHeader (not inside it):
 *
 *   <?xml version="1.0" encoding="UTF-8"?>\n
 *   <Result>
 *     <ResultHeader><Interface Version="2.0"/></ResultHeader>
 *     <Response Type="OK" ID="0"/>
 *     <ResponseRequestList>
 *       <ResponseRequest>
 *         <RequestID>…</RequestID>
 *         <ResponseNumbersList><Number>420777123456</Number>…</ResponseNumbersList>
 *       </ResponseRequest>…
 *     </ResponseRequestList>
 *   </Result>
 *
 * Error: the same without ResponseRequestList and with Response Type="ERROR" ID="<id>".
 * The output has no whitespace between elements (shown indented above only
 * for reading), one "\n" after the XML declaration and no trailing newline.
 */

export const XML_INTERFACE_VERSION = '2.0';

export interface XmlAccepted {
  requestId: string;
  /** digits without + */
  numbers: string[];
}

const XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n';

const ESCAPES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&apos;',
};

/** Escapes &, <, >, " and ' — safe in both text and attribute values. */
function escapeXml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

function header(type: 'OK' | 'ERROR', id: number): string {
  // D9: Result > ResultHeader > Interface@Version, then Result > Response@Type@ID.
  return (
    `<ResultHeader><Interface Version="${escapeXml(XML_INTERFACE_VERSION)}"/></ResultHeader>` +
    `<Response Type="${type}" ID="${escapeXml(String(id))}"/>`
  );
}

export function presentXmlSuccess(accepted: XmlAccepted[]): string {
  let list = '';
  for (const request of accepted) {
    let numbers = '';
    for (const number of request.numbers) numbers += `<Number>${escapeXml(number)}</Number>`;
    list +=
      '<ResponseRequest>' +
      `<RequestID>${escapeXml(request.requestId)}</RequestID>` +
      `<ResponseNumbersList>${numbers}</ResponseNumbersList>` +
      '</ResponseRequest>';
  }
  return `${XML_DECLARATION}<Result>${header('OK', 0)}<ResponseRequestList>${list}</ResponseRequestList></Result>`;
}

export function presentXmlError(errorId: number): string {
  if (!Number.isSafeInteger(errorId) || errorId <= 0) {
    throw new RangeError(`presentXmlError: invalid error ID ${String(errorId)}`);
  }
  return `${XML_DECLARATION}<Result>${header('ERROR', errorId)}</Result>`;
}
