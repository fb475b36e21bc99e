document.getElementById('where').textContent = location.pathname;
