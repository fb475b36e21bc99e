import { mount } from 'svelte'
import App from './App.svelte'
import { applyTheme, storedTheme } from './theme'
import './app.css'

applyTheme(storedTheme()) // before the first paint, so a stored dark theme never flashes light
mount(App, { target: document.getElementById('app')! })
