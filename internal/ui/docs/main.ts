// The API reference at <api>/docs: Swagger UI rendering this runtime's openapi.json. The page
// names the document in data-spec (the content security policy allows no inline script), and
// nothing is fetched from another origin: no validator badge, no remote fonts.
import SwaggerUI from 'swagger-ui-dist/swagger-ui-es-bundle.js'
import 'swagger-ui-dist/swagger-ui.css'
import './docs.css'

SwaggerUI({
  url: document.body.dataset.spec ?? '',
  dom_id: '#docs',
  deepLinking: true,
  validatorUrl: null,
  // Keys typed into Authorize stay in this page's memory.
  persistAuthorization: false,
  displayRequestDuration: true,
  filter: true,
  tryItOutEnabled: false,
  // Same-origin requests carry the cpanel session cookie too; a typed key takes precedence.
  withCredentials: true,
})
