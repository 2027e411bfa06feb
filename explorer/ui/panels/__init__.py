"""The page's panels (Lessons, Workshop, the model choice, Save and share) as features
(``explorer.ui.feature``), one module each, listed in ``explorer.ui.features``."""
