import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { MAX_XML_BYTES, parseXmlRequest, type XmlParseResult } from '../../api/xml/parse.js';
import { XML_INTERFACE_VERSION, presentXmlError, presentXmlSuccess } from '../../api/xml/present.js';

// ---------------------------------------------------------------- helpers

interface ReqSpec {
  type?: string | null; // null = attribute omitted
  sender?: string;
  message?: string | null; // raw XML inside <Message>; null = no Message element
  numbers?: string[] | null; // raw XML inside each <Number>; null = no NumbersList
}

function request(spec: ReqSpec = {}): string {
  const type = spec.type === undefined ? 'high' : spec.type;
  const attrs =
    (type === null ? '' : ` Type="${type}"`) + (spec.sender === undefined ? '' : ` Sender="${spec.sender}"`);
  const message =
    spec.message === null ? '' : `<Message Type="Text">${spec.message ?? 'Hello'}</Message>`;
  const numbers =
    spec.numbers === null
      ? ''
      : `<NumbersList>${(spec.numbers ?? ['+420777123456']).map((n) => `<Number>${n}</Number>`).join('')}</NumbersList>`;
  return `<Request${attrs}>${message}${numbers}</Request>`;
}

function doc(...requests: string[]): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<RequestDocument><RequestList>${requests.join('')}</RequestList></RequestDocument>`;
}

function errorId(result: XmlParseResult): number | 'ok' {
  return result.ok ? 'ok' : result.errorId;
}

function assertOk(result: XmlParseResult): asserts result is Extract<XmlParseResult, { ok: true }> {
  assert.equal(result.ok, true, result.ok ? '' : `expected ok, got ${result.errorId}: ${result.message}`);
}

// ---------------------------------------------------------------- present

describe('presentXmlSuccess / presentXmlError (golden bytes, D9 layout)', () => {
  it('interface version', () => {
    assert.equal(XML_INTERFACE_VERSION, '2.0');
  });

  it('success document with two requests', () => {
    const out = presentXmlSuccess([
      { requestId: 'r-1', numbers: ['420777123456', '420602000001'] },
      { requestId: 'r-2', numbers: ['421900111222'] },
    ]);
    assert.equal(
      out,
      '<?xml version="1.0" encoding="UTF-8"?>\n' +
        '<Result>' +
        '<ResultHeader><Interface Version="2.0"/></ResultHeader>' +
        '<Response Type="OK" ID="0"/>' +
        '<ResponseRequestList>' +
        '<ResponseRequest><RequestID>r-1</RequestID>' +
        '<ResponseNumbersList><Number>420777123456</Number><Number>420602000001</Number></ResponseNumbersList>' +
        '</ResponseRequest>' +
        '<ResponseRequest><RequestID>r-2</RequestID>' +
        '<ResponseNumbersList><Number>421900111222</Number></ResponseNumbersList>' +
        '</ResponseRequest>' +
        '</ResponseRequestList>' +
        '</Result>',
    );
  });

  it('success document with no requests', () => {
    assert.equal(
      presentXmlSuccess([]),
      '<?xml version="1.0" encoding="UTF-8"?>\n<Result><ResultHeader><Interface Version="2.0"/></ResultHeader>' +
        '<Response Type="OK" ID="0"/><ResponseRequestList></ResponseRequestList></Result>',
    );
  });

  it('escapes & < > " \' in text', () => {
    const out = presentXmlSuccess([{ requestId: `a&b<c>d"e'f`, numbers: ['1<2'] }]);
    assert.ok(out.includes('<RequestID>a&amp;b&lt;c&gt;d&quot;e&apos;f</RequestID>'));
    assert.ok(out.includes('<Number>1&lt;2</Number>'));
  });

  it('error documents', () => {
    assert.equal(
      presentXmlError(102),
      '<?xml version="1.0" encoding="UTF-8"?>\n<Result><ResultHeader><Interface Version="2.0"/></ResultHeader>' +
        '<Response Type="ERROR" ID="102"/></Result>',
    );
    assert.equal(
      presentXmlError(103),
      '<?xml version="1.0" encoding="UTF-8"?>\n<Result><ResultHeader><Interface Version="2.0"/></ResultHeader>' +
        '<Response Type="ERROR" ID="103"/></Result>',
    );
  });

  it('refuses a non-integer error ID', () => {
    assert.throws(() => presentXmlError(Number.NaN), RangeError);
    assert.throws(() => presentXmlError(1.5), RangeError);
  });
});

// ---------------------------------------------------------------- parse: success

describe('parseXmlRequest: success', () => {
  it('parses two Requests with entities, CDATA, + numbers and sender forms', () => {
    const xml =
      '<?xml version="1.0" encoding="UTF-8"?>\n' +
      '<RequestDocument>\n' +
      '  <RequestList>\n' +
      '    <Request Type="high" Sender="Sh&#111;p.CZ">\n' +
      '      <Message Type="Text">Price &lt; 10 &#8364; &amp; &#x41;&quot;&apos;&gt;</Message>\n' +
      '      <NumbersList>\n' +
      '        <Number> +420777123456 </Number>\n' +
      '        <Number>420602000001</Number>\n' +
      '      </NumbersList>\n' +
      '      <Unknown foo="bar">ignored</Unknown>\n' +
      '    </Request>\n' +
      '    <Request Type="direct" Sender="+420800123456">\n' +
      '      <NumbersList><Number>+421 900 111 222</Number></NumbersList>\n' +
      '      <Message Type="Text"><![CDATA[Line 1 <b>&amp;</b>\n  Line  2]]> tail</Message>\n' +
      '    </Request>\n' +
      '  </RequestList>\n' +
      '</RequestDocument>\n';
    const result = parseXmlRequest(xml);
    assertOk(result);
    assert.deepEqual(result.requests, [
      {
        type: 'high',
        sender: 'Shop.CZ',
        text: 'Price < 10 € & A"\'>',
        numbers: ['+420777123456', '420602000001'],
      },
      {
        type: 'direct',
        sender: '+420800123456',
        text: 'Line 1 <b>&amp;</b>\n  Line  2 tail',
        numbers: ['+421 900 111 222'],
      },
    ]);
  });

  it('keeps multi-line text as given (no trimming)', () => {
    const text = '\n  Hello,\n\n    world  \n';
    const result = parseXmlRequest(doc(request({ message: text })));
    assertOk(result);
    assert.equal(result.requests[0]?.text, text);
  });

  it('accepts lowcost, omitted sender, empty sender (= omitted), 11-char sender, numeric senders', () => {
    const result = parseXmlRequest(
      doc(
        request({ type: 'lowcost' }),
        request({ sender: '' }),
        request({ sender: 'ABCDEFGHIJK' }),
        request({ sender: '123456789012345' }),
        request({ sender: '+420777123456' }),
        request({ sender: 'Dr. Who-1' }),
      ),
    );
    assertOk(result);
    assert.equal(result.requests[0]?.type, 'lowcost');
    assert.equal('sender' in (result.requests[0] ?? {}), false);
    assert.equal('sender' in (result.requests[1] ?? {}), false);
    assert.deepEqual(
      result.requests.slice(2).map((r) => r.sender),
      ['ABCDEFGHIJK', '123456789012345', '+420777123456', 'Dr. Who-1'],
    );
  });

  it('Request@Type is matched case-insensitively and normalised', () => {
    const result = parseXmlRequest(doc(request({ type: 'HIGH' }), request({ type: ' Direct ' })));
    assertOk(result);
    assert.deepEqual(
      result.requests.map((r) => r.type),
      ['high', 'direct'],
    );
  });

  it('ignores unknown attributes and unknown elements inside Message', () => {
    const xml = doc(request()).replace('<Message Type="Text">', '<Message Type="Text" x="1"><Extra>skip</Extra>');
    const result = parseXmlRequest(xml);
    assertOk(result);
    assert.equal(result.requests[0]?.text, 'Hello');
  });

  it('exactly 1000 characters is accepted', () => {
    const result = parseXmlRequest(doc(request({ message: 'a'.repeat(1000) })));
    assertOk(result);
    assert.equal(result.requests[0]?.text.length, 1000);
  });

  it('1000 emoji is accepted (counted in code points, not UTF-16 units)', () => {
    const text = '😀'.repeat(1000);
    assert.equal(text.length, 2000);
    const result = parseXmlRequest(doc(request({ message: text })));
    assertOk(result);
    assert.equal(result.requests[0]?.text, text);
  });

  it('accepts a document of exactly MAX_XML_BYTES', () => {
    const base = doc(request({ message: 'X' }));
    const padding = MAX_XML_BYTES - Buffer.byteLength(base, 'utf8');
    const xml = base.replace('<RequestList>', `<RequestList><!--${' '.repeat(padding - 7)}-->`);
    assert.equal(Buffer.byteLength(xml, 'utf8'), MAX_XML_BYTES);
    assertOk(parseXmlRequest(xml));
  });

  it('accepts a leading byte-order mark', () => {
    assertOk(parseXmlRequest(`\uFEFF${doc(request())}`));
  });
});

// ---------------------------------------------------------------- parse: errors

describe('parseXmlRequest: 101 no XMLDATA', () => {
  it('missing', () => assert.equal(errorId(parseXmlRequest(undefined)), 101));
  it('empty', () => assert.equal(errorId(parseXmlRequest('')), 101));
  it('whitespace only', () => assert.equal(errorId(parseXmlRequest('  \n\t ')), 101));
});

describe('parseXmlRequest: 102 malformed', () => {
  it('not well-formed (unclosed tags)', () => {
    assert.equal(errorId(parseXmlRequest('<RequestDocument><RequestList><Request Type="high">')), 102);
  });
  it('not well-formed (mismatched tag)', () => {
    assert.equal(errorId(parseXmlRequest(doc(request()).replace('</Message>', '</Messag>'))), 102);
  });
  it('not XML at all', () => {
    assert.equal(errorId(parseXmlRequest('hello world')), 102);
  });
  it('undefined (HTML) entity', () => {
    assert.equal(errorId(parseXmlRequest(doc(request({ message: 'a&nbsp;b' })))), 102);
  });
  it('raw control character', () => {
    assert.equal(errorId(parseXmlRequest(doc(request({ message: 'a\u0001b' })))), 102);
  });
  it('two root elements', () => {
    assert.equal(errorId(parseXmlRequest(doc(request()) + '<RequestDocument/>')), 102);
  });
  it('wrong root', () => {
    assert.equal(
      errorId(parseXmlRequest(`<Foo><RequestList>${request()}</RequestList></Foo>`)),
      102,
    );
  });
  it('missing RequestList', () => {
    assert.equal(errorId(parseXmlRequest(`<RequestDocument>${request()}</RequestDocument>`)), 102);
  });
  it('no Request elements', () => {
    assert.equal(errorId(parseXmlRequest(doc())), 102);
  });
  it('unknown Request@Type', () => {
    assert.equal(errorId(parseXmlRequest(doc(request({ type: 'express' })))), 102);
  });
  it('missing Request@Type', () => {
    assert.equal(errorId(parseXmlRequest(doc(request({ type: null })))), 102);
  });
  it('over-size document', () => {
    const base = doc(request({ message: 'X' }));
    const xml = base.replace('<RequestList>', `<RequestList><!--${' '.repeat(MAX_XML_BYTES)}-->`);
    const result = parseXmlRequest(xml);
    assert.equal(errorId(result), 102);
  });
  it('over-size by UTF-8 bytes, not string length', () => {
    const base = doc(request({ message: 'X' }));
    const filler = 'č'.repeat(Math.ceil(MAX_XML_BYTES / 2)); // 2 bytes each
    const xml = base.replace('<RequestList>', `<RequestList><!--${filler}-->`);
    assert.ok(xml.length < MAX_XML_BYTES);
    assert.equal(errorId(parseXmlRequest(xml)), 102);
  });

  it('DOCTYPE with internal entities ("billion laughs") is refused', () => {
    const lol =
      '<?xml version="1.0"?>\n' +
      '<!DOCTYPE RequestDocument [\n' +
      '  <!ENTITY lol "lol">\n' +
      '  <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">\n' +
      '  <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">\n' +
      '  <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">\n' +
      '  <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">\n' +
      '  <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">\n' +
      '  <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">\n' +
      '  <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">\n' +
      '  <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">\n' +
      '  <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">\n' +
      ']>\n' +
      '<RequestDocument><RequestList>' +
      request({ message: '&lol9;' }) +
      '</RequestList></RequestDocument>';
    const started = Date.now();
    const result = parseXmlRequest(lol);
    assert.equal(errorId(result), 102);
    assert.ok(Date.now() - started < 1000);
    assert.ok(!JSON.stringify(result).includes('lollol'));
  });

  it('DOCTYPE with SYSTEM external entity is refused and never leaks file contents', () => {
    const xxe =
      '<?xml version="1.0"?>\n' +
      '<!DOCTYPE RequestDocument [ <!ENTITY xxe SYSTEM "file:///etc/passwd"> ]>\n' +
      '<RequestDocument><RequestList>' +
      request({ message: '&xxe;' }) +
      '</RequestList></RequestDocument>';
    const result = parseXmlRequest(xxe);
    assert.equal(errorId(result), 102);
    const serialized = JSON.stringify(result);
    assert.ok(!serialized.includes('root:'), serialized);
    assert.ok(!serialized.includes('/bin/'), serialized);
    assert.ok(!presentXmlError(102).includes('root:'));
  });

  it('bare DOCTYPE without internal subset is refused', () => {
    assert.equal(errorId(parseXmlRequest(`<!DOCTYPE RequestDocument>${doc(request()).split('\n')[1] ?? ''}`)), 102);
  });

  it('more than one Message in a Request', () => {
    const xml = doc(request()).replace('</Message>', '</Message><Message>again</Message>');
    assert.equal(errorId(parseXmlRequest(xml)), 102);
  });
});

describe('parseXmlRequest: 109 required data missing', () => {
  it('no Message', () => assert.equal(errorId(parseXmlRequest(doc(request({ message: null })))), 109));
  it('no NumbersList', () => assert.equal(errorId(parseXmlRequest(doc(request({ numbers: null })))), 109));
  it('NumbersList without Number', () => assert.equal(errorId(parseXmlRequest(doc(request({ numbers: [] })))), 109));
});

describe('parseXmlRequest: 201 number without digits', () => {
  it('"abc"', () => assert.equal(errorId(parseXmlRequest(doc(request({ numbers: ['abc'] })))), 201));
  it('one bad number among good ones', () => {
    assert.equal(errorId(parseXmlRequest(doc(request({ numbers: ['+420777123456', '+'] })))), 201);
  });
  it('empty Number element', () => assert.equal(errorId(parseXmlRequest(doc(request({ numbers: ['  '] })))), 201));
});

describe('parseXmlRequest: 202 text', () => {
  it('empty text', () => assert.equal(errorId(parseXmlRequest(doc(request({ message: '' })))), 202));
  it('whitespace-only text', () => assert.equal(errorId(parseXmlRequest(doc(request({ message: ' \n ' })))), 202));
  it('1001 characters', () => {
    assert.equal(errorId(parseXmlRequest(doc(request({ message: 'a'.repeat(1001) })))), 202);
  });
  it('1001 emoji', () => {
    assert.equal(errorId(parseXmlRequest(doc(request({ message: '😀'.repeat(1001) })))), 202);
  });
});

describe('parseXmlRequest: 203 sender', () => {
  it('12 letters', () => assert.equal(errorId(parseXmlRequest(doc(request({ sender: 'ABCDEFGHIJKL' })))), 203));
  it('invalid characters', () => {
    assert.equal(errorId(parseXmlRequest(doc(request({ sender: 'Shop!' })))), 203);
    assert.equal(errorId(parseXmlRequest(doc(request({ sender: 'Café' })))), 203);
    assert.equal(errorId(parseXmlRequest(doc(request({ sender: '&lt;b&gt;' })))), 203);
  });
  it('number of 16 digits', () => {
    assert.equal(errorId(parseXmlRequest(doc(request({ sender: '1234567890123456' })))), 203);
  });
});

describe('parseXmlRequest: first problem wins, whole document checked', () => {
  it('first Request decides across two Requests (203 before 201)', () => {
    const xml = doc(request({ sender: 'ABCDEFGHIJKL' }), request({ numbers: ['abc'] }));
    assert.equal(errorId(parseXmlRequest(xml)), 203);
  });
  it('first Request decides across two Requests (201 before 203)', () => {
    const xml = doc(request({ numbers: ['abc'] }), request({ sender: 'ABCDEFGHIJKL' }));
    assert.equal(errorId(parseXmlRequest(xml)), 201);
  });
  it('unknown Type in the second Request after 202 in the first', () => {
    const xml = doc(request({ message: '' }), request({ type: 'express' }));
    assert.equal(errorId(parseXmlRequest(xml)), 202);
  });
  it('a valid first Request is not accepted when the second fails', () => {
    const result = parseXmlRequest(doc(request(), request({ message: null })));
    assert.equal(errorId(result), 109);
    assert.equal('requests' in result, false);
  });
  it('document-level malformation wins over an earlier request problem', () => {
    const xml = doc(request({ sender: 'ABCDEFGHIJKL' })).replace('</RequestDocument>', '');
    assert.equal(errorId(parseXmlRequest(xml)), 102);
  });
  it('within one Request: Type, then 109, 201, 202, 203', () => {
    assert.equal(
      errorId(parseXmlRequest(doc(request({ type: 'x', message: null, sender: 'ABCDEFGHIJKL' })))),
      102,
    );
    assert.equal(
      errorId(parseXmlRequest(doc(request({ message: null, numbers: ['abc'], sender: 'ABCDEFGHIJKL' })))),
      109,
    );
    assert.equal(
      errorId(parseXmlRequest(doc(request({ message: '', numbers: ['abc'], sender: 'ABCDEFGHIJKL' })))),
      201,
    );
    assert.equal(errorId(parseXmlRequest(doc(request({ message: '', sender: 'ABCDEFGHIJKL' })))), 202);
  });
});

describe('parseXmlRequest: never throws', () => {
  it('garbage inputs return a result', () => {
    const inputs = [
      '<',
      '<<<>>>',
      '<RequestDocument',
      '<RequestDocument><![CDATA[',
      '<?xml',
      '<!--',
      '<!DOCTYPE',
      '</RequestDocument>',
      '<RequestDocument>&#xD800;</RequestDocument>',
      '<!ENTITY x SYSTEM "file:///etc/passwd"><RequestDocument/>',
      doc(request()).replace('<RequestList>', '<RequestList><!FOO bar>'),
      '\u0000',
      doc(request()) + 'trailing text',
    ];
    for (const input of inputs) {
      const result = parseXmlRequest(input);
      assert.equal(result.ok, false, input);
      assert.equal(errorId(result), 102, input);
    }
  });
});
