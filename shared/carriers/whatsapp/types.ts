/**
 * Shapes of the WhatsApp Cloud API (Meta Graph) objects the connector reads and writes, as Graph
 * spells them (snake_case). Only the fields we use are typed; Graph may send more.
 */

/** One component of a registered message template (`GET /{waba-id}/message_templates`). */
export interface GraphTemplateComponent {
  type: 'HEADER' | 'BODY' | 'FOOTER' | 'BUTTONS' | (string & {});
  /** HEADER: TEXT, IMAGE, VIDEO, DOCUMENT, LOCATION. */
  format?: string;
  text?: string;
  example?: {
    header_text?: string[];
    header_text_named_params?: { param_name: string; example: string }[];
    header_handle?: string[];
    body_text?: string[][];
    body_text_named_params?: { param_name: string; example: string }[];
  };
  /** BUTTONS: in the order Meta indexes them (`index` "0", "1", …). */
  buttons?: GraphTemplateButton[];
}

export interface GraphTemplateButton {
  /** URL, QUICK_REPLY, PHONE_NUMBER, COPY_CODE, OTP, FLOW, CATALOG, … */
  type: string;
  text?: string;
  url?: string;
  example?: string[];
}

export interface GraphTemplate {
  id?: string;
  name: string;
  language: string;
  /** APPROVED, PENDING, REJECTED, PAUSED, DISABLED, … */
  status?: string;
  /** MARKETING, UTILITY, AUTHENTICATION. */
  category?: string;
  parameter_format?: 'NAMED' | 'POSITIONAL';
  components?: GraphTemplateComponent[];
}

export interface GraphPhoneNumber {
  id: string;
  display_phone_number?: string;
  verified_name?: string;
  code_verification_status?: string;
  quality_rating?: string;
  status?: string;
  platform_type?: string;
  name_status?: string;
  messaging_limit_tier?: string;
  account_mode?: string;
  throughput?: { level?: string };
}

export interface GraphWaba {
  id: string;
  name?: string;
  currency?: string;
  timezone_id?: string;
  country?: string;
  message_template_namespace?: string;
  owner_business_info?: { id: string; name: string };
  account_review_status?: string;
  business_verification_status?: string;
  ownership_type?: string;
}

/** A template parameter as sent in `template.components[].parameters[]`. */
export type GraphParameter =
  | { type: 'text'; text: string; parameter_name?: string }
  | { type: 'payload'; payload: string }
  | { type: 'coupon_code'; coupon_code: string }
  | { type: 'action'; action: { flow_token: string } }
  | { type: 'image' | 'video'; image?: GraphMedia; video?: GraphMedia }
  | { type: 'document'; document: GraphMedia & { filename?: string } };

export interface GraphMedia {
  link?: string;
  id?: string;
}

export interface GraphSendComponent {
  type: 'header' | 'body' | 'button';
  sub_type?: 'url' | 'quick_reply' | 'copy_code' | 'flow';
  index?: string;
  parameters: GraphParameter[];
}

/** The body of `POST /{version}/{phone-number-id}/messages`. */
export interface GraphSendBody {
  messaging_product: 'whatsapp';
  recipient_type: 'individual';
  to: string;
  type: 'text' | 'template';
  text?: { body: string; preview_url: boolean };
  template?: {
    name: string;
    language: { code: string; policy: 'deterministic' };
    components?: GraphSendComponent[];
  };
  context?: { message_id: string };
  biz_opaque_callback_data?: string;
}
