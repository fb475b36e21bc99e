package handlers

// fileRoutes are the file manager's routes under workers/files and plugins/files.
func (a *API) fileRoutes() []route { return nil }
